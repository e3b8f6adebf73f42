"""What every command module shares: the Typer app and its root options, the --output option,
the hooks tests replace (TRANSPORT, POLL_SLEEP), error handling (_errors, Failure) and the
output helpers (_emit, _table, _details, _metrics, ...). It registers no command: the command
modules import it, and `tuneboard_client.cli` imports them."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any

import httpx
import typer

from tuneboard_client import config, study_file
from tuneboard_client.api import Client, TuneboardAPIError

# Tests put an httpx.MockTransport here; None is the network.
TRANSPORT: httpx.BaseTransport | None = None
POLL_SECONDS = 2.0
OUTPUTS = ("table", "json")

app = typer.Typer(help="Tuneboard on the command line: studies, trials, models, ensembles, leaderboards.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)

OutputOption = Annotated[str | None, typer.Option("--output", "-o", help="table (default) or json.",
                                                  show_default=False)]


class Failure(Exception):
    """Exit 1 with this message (no traceback)."""


def _errors(func: Callable) -> Callable:
    """Every API or input error: its message on stderr and exit code 1."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (TuneboardAPIError, study_file.StudyFileError, config.ConfigError, Failure) as exc:
            typer.echo(f"Error: {exc}", err=True)
            raise typer.Exit(1) from None
        except OSError as exc:
            typer.echo(f"Error: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", err=True)
            raise typer.Exit(1) from None

    return wrapper


@app.callback()
def _main(ctx: typer.Context,
          url: Annotated[str | None, typer.Option(help="Server URL (else TUNEBOARD_URL, else the login file).")] = None,
          token: Annotated[str | None, typer.Option(help="API token (else TUNEBOARD_TOKEN, else the login file).",
                                                    show_default=False)] = None,
          team: Annotated[str | None, typer.Option(help="Team id, sent as X-Tuneboard-Team (else TUNEBOARD_TEAM; "
                                                        "default: the token's team).")] = None,
          output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table"):
    if output not in OUTPUTS:
        raise typer.BadParameter(f"use one of {', '.join(OUTPUTS)}", param_hint="--output")
    ctx.obj = {"url": url, "token": token, "team": team, "output": output}


# --- helpers --------------------------------------------------------------------------------


def _root(ctx: typer.Context) -> dict:
    return ctx.find_root().obj or {}


def _connect(url: str, token: str, team: str | None) -> Client:
    return Client(url, token, team, transport=TRANSPORT)


def _client(ctx: typer.Context) -> Client:
    opts = _root(ctx)
    settings = config.load(url=opts.get("url"), token=opts.get("token"), team=opts.get("team"))
    return _connect(settings.url, settings.token, settings.team)


def _output(ctx: typer.Context, output: str | None) -> str:
    chosen = output or _root(ctx).get("output") or "table"
    if chosen not in OUTPUTS:
        raise Failure(f"--output must be one of {', '.join(OUTPUTS)}, not {chosen!r}.")
    return chosen


def _json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _label(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return str(value.get("name") or value.get("label") or value.get("id") or "")
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return ", ".join(_label(v) for v in value)
    return str(value)


def _metrics(values: Any, keep: Sequence[str] = ()) -> str:
    if not isinstance(values, dict):
        return _label(values)
    names = [k for k in keep if k in values] or sorted(values)[:3]
    return " ".join(f"{k}={_label(values[k])}" for k in names)


def _table(rows: list[dict], columns: list[tuple[str, Callable[[dict], Any]]]) -> None:
    if not rows:
        typer.echo("(none)")
        return
    cells = [[header for header, _ in columns]]
    for row in rows:
        cells.append([_label(get(row)) for _, get in columns])
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for index, line in enumerate(cells):
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
        if index == 0:
            typer.echo("  ".join("-" * width for width in widths))


def _details(data: dict, keys: Sequence[str] | None = None) -> None:
    keys = keys or list(data)
    width = max((len(k) for k in keys if k in data), default=0)
    for key in keys:
        if key not in data:
            continue
        value = data[key]
        text = json.dumps(value, default=str) if isinstance(value, dict | list) else _label(value)
        typer.echo(f"{key.ljust(width)}  {text}")


def _emit(ctx: typer.Context, output: str | None, data: Any, show: Callable[[], None]) -> None:
    if _output(ctx, output) == "json":
        _json(data)
    else:
        show()


def POLL_SLEEP(seconds: float) -> None:  # noqa: N802 - a hook tests replace
    import time

    time.sleep(seconds)


def _sleep(seconds: float) -> None:
    # The command modules call this, not POLL_SLEEP itself: a name they imported would keep the
    # original when a test replaces the hook here.
    POLL_SLEEP(seconds)

