"""`tuneboard`: Tuneboard on the command line.

Tables by default; `-o json` (before the command, or after most commands) prints the API's
JSON for scripts. A refused call prints the server's message and exits with code 1."""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from tuneboard_client import config, study_file
from tuneboard_client.api import (
    ENSEMBLE_METHODS,
    MODEL_ACTIVE,
    MODEL_FORMATS,
    Client,
    TuneboardAPIError,
    normalise_method,
)

# Tests put an httpx.MockTransport here; None is the network.
TRANSPORT: httpx.BaseTransport | None = None
POLL_SECONDS = 2.0
OUTPUTS = ("table", "json")

app = typer.Typer(help="Tuneboard on the command line: studies, trials, models, ensembles, leaderboards.",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
datasets_app = typer.Typer(help="The team's datasets.", no_args_is_help=True)
studies_app = typer.Typer(help="Create, start, follow and inspect studies.", no_args_is_help=True)
trials_app = typer.Typer(help="A study's trials.", no_args_is_help=True)
models_app = typer.Typer(help="Trained models: retrain or promote trials, list, download.", no_args_is_help=True)
ensembles_app = typer.Typer(help="Ensembles of models and trial checkpoints.", no_args_is_help=True)
workers_app = typer.Typer(help="The workers that run trials and models.", no_args_is_help=True)
for sub, name in ((datasets_app, "datasets"), (studies_app, "studies"), (trials_app, "trials"),
                  (models_app, "models"), (ensembles_app, "ensembles"), (workers_app, "workers")):
    app.add_typer(sub, name=name)

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


def _client(ctx: typer.Context) -> Client:
    opts = _root(ctx)
    settings = config.load(url=opts.get("url"), token=opts.get("token"), team=opts.get("team"))
    return Client(settings.url, settings.token, settings.team, transport=TRANSPORT)


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


def _progress(study: dict) -> dict:
    progress = study.get("progress") or {}
    return {k: int(progress.get(k) or 0) for k in ("completed", "failed", "running", "total", "max_trials")}


def _best(study: dict) -> str:
    best = study.get("best_trial")
    if isinstance(best, dict):
        score = best.get("score")
        number = best.get("number", best.get("id"))
        return f"{_label(score)} (trial {number})" if score is not None else f"trial {number}"
    return _label(best)


STUDY_COLUMNS = [
    ("ID", lambda s: s.get("id")), ("NAME", lambda s: s.get("name")), ("STATUS", lambda s: s.get("status")),
    ("DATASET", lambda s: s.get("dataset_name") or s.get("dataset")), ("HYPERMODEL", lambda s: s.get("hypermodel")),
    ("TUNER", lambda s: s.get("tuner")),
    ("TRIALS", lambda s: f"{_progress(s)['completed'] + _progress(s)['failed']}/{_progress(s)['max_trials']}"
     if s.get("progress") else s.get("max_trials")),
    ("BEST", _best),
]
MODEL_COLUMNS = [
    ("ID", lambda m: m.get("id")), ("NAME", lambda m: f"{m.get('name')} v{m.get('version')}"
                                     if m.get("version") is not None else m.get("name")),
    ("KIND", lambda m: m.get("kind")), ("METHOD", lambda m: m.get("method")), ("STATUS", lambda m: m.get("status")),
    ("STUDY", lambda m: m.get("study")), ("TEST", lambda m: _metrics(m.get("test_metrics"), ("accuracy", "loss"))),
]


# --- login ----------------------------------------------------------------------------------


@app.command()
@_errors
def login(ctx: typer.Context,
          url: Annotated[str | None, typer.Option(help="The server, e.g. https://tuneboard.example.com")] = None,
          token: Annotated[str | None, typer.Option(help="A personal API token (Account → API tokens).",
                                                    show_default=False)] = None,
          team: Annotated[str | None, typer.Option(help="Team id to act for (default: the token's team).")] = None,
          verify: Annotated[bool, typer.Option(help="Check the token against the server first.")] = True):
    """Store the server URL and API token in ~/.config/tuneboard/config.json (mode 600)."""
    opts = _root(ctx)
    url = url or opts.get("url") or typer.prompt("Tuneboard URL")
    token = token or opts.get("token") or typer.prompt("API token", hide_input=True)
    team = team or opts.get("team")
    if verify:
        with Client(url, token, team, transport=TRANSPORT) as client:
            client.get("studies/", page_size=1)
    path = config.save(config.Settings(url=url, token=token, team=team))
    typer.echo(f"Logged in to {url}; saved to {path} (readable by you only).")


# --- datasets -------------------------------------------------------------------------------


@datasets_app.command("list")
@_errors
def datasets_list(ctx: typer.Context, kind: str | None = None, task: str | None = None,
                  q: Annotated[str | None, typer.Option("--q", help="Search in names.")] = None,
                  output: OutputOption = None):
    """The team's datasets."""
    rows = _client(ctx).list_datasets(kind=kind, task=task, q=q)
    _emit(ctx, output, rows, lambda: _table(rows, [
        ("ID", lambda d: d.get("id")), ("NAME", lambda d: d.get("name")), ("KIND", lambda d: d.get("kind")),
        ("TASK", lambda d: d.get("task")), ("ROWS", lambda d: d.get("rows") or d.get("n_rows")),
    ]))


@datasets_app.command("show")
@_errors
def datasets_show(ctx: typer.Context, dataset: Annotated[str, typer.Argument(help="Id or name.")],
                  output: OutputOption = None):
    """One dataset."""
    client = _client(ctx)
    data = client.get_dataset(client.resolve_dataset(dataset))
    _emit(ctx, output, data, lambda: _details(data))


@datasets_app.command("add-bundled")
@_errors
def datasets_add_bundled(ctx: typer.Context, bundled_name: str, name: str | None = None,
                         output: OutputOption = None):
    """Add one of the bundled datasets (iris, digits, ...) to the team."""
    data = _client(ctx).create_bundled_dataset(bundled_name, name)
    _emit(ctx, output, data, lambda: typer.echo(f"Dataset {data.get('id')} {data.get('name')!r} created."))


# --- studies --------------------------------------------------------------------------------


@studies_app.command("create")
@_errors
def studies_create(ctx: typer.Context,
                   file: Annotated[Path, typer.Option("--file", "-f", help="The YAML study file.")],
                   start: Annotated[bool | None, typer.Option("--start/--no-start",
                                                              help="Start it at once (default: the file's "
                                                                   "`start:`, else no).")] = None,
                   output: OutputOption = None):
    """Create a study from a YAML study file (see the client's README for the format)."""
    fields = study_file.load(file)
    client = _client(ctx)
    payload, file_start = study_file.resolve(fields, client.resolve_dataset)
    start = bool(file_start) if start is None else start
    study = client.create_study(payload, start=start)
    _emit(ctx, output, study, lambda: typer.echo(
        f"Study {study.get('id')} {study.get('name')!r} created{' and started' if start else ''} "
        f"(status {study.get('status')})."))


@studies_app.command("list")
@_errors
def studies_list(ctx: typer.Context, status: str | None = None, dataset: str | None = None,
                 hypermodel: str | None = None, tag: str | None = None,
                 q: Annotated[str | None, typer.Option("--q", help="Search in names.")] = None,
                 ordering: Annotated[str, typer.Option("--ordering", "--order")] = "-created",
                 limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
                 output: OutputOption = None):
    """The team's studies, newest first."""
    client = _client(ctx)
    dataset_id = client.resolve_dataset(dataset) if dataset else None
    rows = client.list_studies(status=status, dataset=dataset_id, hypermodel=hypermodel, tag=tag, q=q,
                               ordering=ordering, limit=limit)
    _emit(ctx, output, rows, lambda: _table(rows, STUDY_COLUMNS))


@studies_app.command("show")
@_errors
def studies_show(ctx: typer.Context, study_id: int, output: OutputOption = None):
    """One study, with its progress and best trial."""
    study = _client(ctx).get_study(study_id)

    def show():
        _details(study, [k for k in study if k not in ("progress", "best_trial", "search_space")])
        progress = _progress(study)
        typer.echo(f"progress    {progress['completed']} completed, {progress['failed']} failed, "
                   f"{progress['running']} running of {progress['max_trials']}")
        typer.echo(f"best_trial  {_best(study)}")

    _emit(ctx, output, study, show)


def _bar(study: dict, width: int = 30) -> str:
    p = _progress(study)
    done = p["completed"] + p["failed"]
    total = max(p["max_trials"], done, 1)
    filled = int(width * done / total)
    return (f"[{'#' * filled}{'-' * (width - filled)}] {done}/{total} trials  "
            f"({p['completed']} ok, {p['failed']} failed, {p['running']} running)  {study.get('status')}"
            + (f"  best {_best(study)}" if study.get("best_trial") else ""))


@studies_app.command("watch")
@_errors
def studies_watch(ctx: typer.Context, study_id: int,
                  interval: Annotated[float, typer.Option(help="Seconds between polls.")] = POLL_SECONDS,
                  timeout: Annotated[float | None, typer.Option(help="Give up after this many seconds.")] = None,
                  output: OutputOption = None):
    """Follow a study until it ends: a progress bar, then exit 0 if it completed, 1 if it
    failed or was cancelled."""
    as_json = _output(ctx, output) == "json"
    last = {"line": ""}

    def draw(study: dict) -> None:
        if as_json:
            return
        line = _bar(study)
        pad = " " * max(0, len(last["line"]) - len(line))
        typer.echo(f"\r{line}{pad}", nl=False, err=True)
        last["line"] = line

    study = _client(ctx).watch_study(study_id, interval=interval, timeout=timeout, on_poll=draw,
                                     sleep=lambda seconds: POLL_SLEEP(seconds))
    if as_json:
        _json(study)
    else:
        typer.echo("", err=True)
        typer.echo(f"Study {study_id} {study.get('status')}"
                   + (f": best {_best(study)}" if study.get("best_trial") else "")
                   + (f" — {study['message']}" if study.get("message") else ""))
    if study.get("status") != "completed":
        raise typer.Exit(1)


def _study_action(action: str, help_text: str) -> None:
    @studies_app.command(action, help=help_text)
    @_errors
    def command(ctx: typer.Context, study_id: int, output: OutputOption = None):
        study = getattr(_client(ctx), f"{action}_study")(study_id)
        _emit(ctx, output, study, lambda: typer.echo(f"Study {study_id}: {study.get('status', action)}."))


_study_action("start", "Start a saved study.")
_study_action("cancel", "Cancel a running study.")
_study_action("resume", "Resume a cancelled or failed study.")


@studies_app.command("budget")
@_errors
def studies_budget(ctx: typer.Context, study_id: int, max_trials: int | None = None,
                   parallelism: int | None = None, output: OutputOption = None):
    """Change a study's max trials or parallelism."""
    study = _client(ctx).set_budget(study_id, max_trials=max_trials, parallelism=parallelism)
    _emit(ctx, output, study, lambda: typer.echo(f"Study {study_id}: max_trials {study.get('max_trials')}, "
                                                 f"parallelism {study.get('parallelism')}."))


@studies_app.command("clone")
@_errors
def studies_clone(ctx: typer.Context, study_id: int, name: Annotated[str, typer.Option(help="The copy's name.")],
                  output: OutputOption = None):
    """A saved, not started copy of a study."""
    study = _client(ctx).clone_study(study_id, name)
    _emit(ctx, output, study, lambda: typer.echo(f"Study {study.get('id')} {study.get('name')!r} created."))


# --- trials ---------------------------------------------------------------------------------

TRIAL_COLUMNS = [
    ("ID", lambda t: t.get("id")), ("NUMBER", lambda t: t.get("number")), ("STATUS", lambda t: t.get("status")),
    ("SCORE", lambda t: t.get("score")), ("BEST EPOCH", lambda t: t.get("best_epoch")),
    ("METRICS", lambda t: _metrics(t.get("metrics"), ("val_accuracy", "val_loss"))),
    ("HYPERPARAMETERS", lambda t: " ".join(f"{k}={_label(v)}" for k, v in (t.get("hyperparameters") or {}).items()
                                           if not str(k).startswith("tuner/"))),
]


@trials_app.command("list")
@_errors
def trials_list(ctx: typer.Context, study_id: int, status: str | None = None,
                order: Annotated[str | None, typer.Option("--order", "--ordering",
                                                          help="e.g. -val_accuracy, score, number, hp.units")] = None,
                limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
                follow: Annotated[bool, typer.Option(help="Keep printing new trials until the study ends.")] = False,
                output: OutputOption = None):
    """A study's trials (--follow: as they start, polling with after=)."""
    client = _client(ctx)
    if not follow:
        rows = client.list_trials(study_id, status=status, ordering=order, limit=limit)
        _emit(ctx, output, rows, lambda: _table(rows, TRIAL_COLUMNS))
        return
    as_json = _output(ctx, output) == "json"
    after, seen, ended = None, {}, False
    while True:
        ended = client.get_study(study_id).get("status") not in ("created", "running")
        for trial in client.new_trials(study_id, after=after, status=status):
            after = max(after or 0, int(trial["id"]))
            seen[trial["id"]] = trial
            if as_json:
                typer.echo(json.dumps(trial, default=str))
            else:
                typer.echo("  ".join(f"{h.lower()}={_label(get(trial))}" for h, get in TRIAL_COLUMNS))
        if ended:
            return
        POLL_SLEEP(POLL_SECONDS)


def POLL_SLEEP(seconds: float) -> None:  # noqa: N802 - a hook tests replace
    import time

    time.sleep(seconds)


@trials_app.command("show")
@_errors
def trials_show(ctx: typer.Context, study_id: int, trial_id: int,
                epochs: Annotated[bool, typer.Option(help="Also the per-epoch metrics.")] = False,
                output: OutputOption = None):
    """One trial (by its id, the ID column of `trials list`)."""
    client = _client(ctx)
    trial = client.get_trial(study_id, trial_id)
    if epochs:
        trial = {**trial, "epochs": client.trial_epochs(study_id, trial_id)}
    _emit(ctx, output, trial, lambda: _details(trial))


# --- models ---------------------------------------------------------------------------------


def _wait_all(ctx: typer.Context, client: Client, models: list[dict], as_json: bool) -> list[dict]:
    finished = []
    for model in models:
        def note(m: dict, _seen={"status": None}) -> None:  # noqa: B006 - per-model memo
            if not as_json and m.get("status") != _seen["status"]:
                _seen["status"] = m.get("status")
                typer.echo(f"Model {m.get('id')} {m.get('name', '')}: {m.get('status')}", err=True)

        finished.append(client.wait_model(model, interval=POLL_SECONDS, on_poll=note, sleep=POLL_SLEEP))
    return finished


def _report_models(ctx: typer.Context, output: str | None, models: list[dict], waited: bool) -> None:
    _emit(ctx, output, models, lambda: _table(models, MODEL_COLUMNS))
    failed = [m for m in models if waited and m.get("status") not in ("completed", *MODEL_ACTIVE)]
    for model in failed:
        typer.echo(f"Error: model {model.get('id')} {model.get('status')}: {model.get('error') or 'no reason given'}",
                   err=True)
    if failed:
        raise typer.Exit(1)


@models_app.command("retrain")
@_errors
def models_retrain(ctx: typer.Context, study_id: Annotated[int, typer.Argument(metavar="STUDY")],
                   top: Annotated[int | None, typer.Option("--top", help="The study's best N trials.")] = None,
                   trial: Annotated[int | None, typer.Option(help="One trial (its id) instead of --top.")] = None,
                   method: Annotated[str, typer.Option(help="retrain (on train+validation) or promote "
                                                            "(the trial's checkpoint as is).")] = "retrain",
                   epoch_source: Annotated[str | None, typer.Option(help="detect or recorded.")] = None,
                   epoch_cap: int | None = None,
                   name: Annotated[str | None, typer.Option(help="The models' name (versions count up).")] = None,
                   wait: Annotated[bool, typer.Option(help="Wait until they are trained.")] = False,
                   output: OutputOption = None):
    """Retrain (or promote) a study's best trials as models."""
    if top is None and trial is None:
        top = 1
    if top is not None and trial is not None:
        raise Failure("Give --top or --trial, not both.")
    client = _client(ctx)
    models = client.request_models(study_id, top_n=top, trial=trial, method=method, epoch_source=epoch_source,
                                   epoch_cap=epoch_cap, name=name)
    if wait:
        models = _wait_all(ctx, client, models, _output(ctx, output) == "json")
    _report_models(ctx, output, models, wait)


@models_app.command("list")
@_errors
def models_list(ctx: typer.Context, dataset: str | None = None, study: int | None = None,
                status: str | None = None, kind: str | None = None,
                limit: Annotated[int | None, typer.Option(help="At most this many.")] = None,
                output: OutputOption = None):
    """The team's models and ensembles."""
    client = _client(ctx)
    dataset_id = client.resolve_dataset(dataset) if dataset else None
    rows = client.list_models(dataset=dataset_id, study=study, status=status, kind=kind, limit=limit)
    _emit(ctx, output, rows, lambda: _table(rows, MODEL_COLUMNS))


@models_app.command("show")
@_errors
def models_show(ctx: typer.Context, model_id: int, output: OutputOption = None):
    """One model."""
    model = _client(ctx).get_model(model_id)
    _emit(ctx, output, model, lambda: _details(model))


@models_app.command("wait")
@_errors
def models_wait(ctx: typer.Context, model_ids: list[int], output: OutputOption = None):
    """Wait for models (or ensembles) to finish; exit 1 if one failed."""
    client = _client(ctx)
    models = _wait_all(ctx, client, list(model_ids), _output(ctx, output) == "json")
    _report_models(ctx, output, models, True)


@models_app.command("download")
@_errors
def models_download(ctx: typer.Context, model_id: int,
                    fmt: Annotated[str, typer.Option("--format", "-f", help=", ".join(MODEL_FORMATS))] = "keras",
                    out: Annotated[Path, typer.Option("--out", "-o", help="A file or folder; for savedmodel, the "
                                                                           "folder the zip is extracted into.")
                                   ] = Path("."),
                    keep_zip: Annotated[bool, typer.Option(help="savedmodel: keep the zip, do not extract.")] = False):
    """Download one export, checked against the server's SHA-256; a SavedModel zip is
    extracted into the folder given with -o."""
    client = _client(ctx)
    if fmt != "savedmodel" or keep_zip:
        if fmt == "savedmodel" or str(out).endswith(("/", "\\")):
            out.mkdir(parents=True, exist_ok=True)
        path = client.download_model(model_id, fmt, out)
        typer.echo(f"Saved {path} (SHA-256 checked).")
        return
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".download-") as tmp:
        archive = client.download_model(model_id, fmt, Path(tmp))
        try:
            with zipfile.ZipFile(archive) as zf:
                target = out.resolve()
                for member in zf.namelist():
                    if not (target / member).resolve().is_relative_to(target):
                        raise Failure(f"The archive holds a path outside the folder: {member!r}; not extracted.")
                zf.extractall(out)
                names = zf.namelist()
        except zipfile.BadZipFile as exc:
            raise Failure(f"The SavedModel download is not a zip file: {exc}") from exc
    roots = sorted({str(Path(n).parent) for n in names if n.endswith("saved_model.pb")})
    where = ", ".join(str(out / r) for r in roots) or str(out)
    typer.echo(f"SavedModel extracted to {where} (SHA-256 checked).")


# --- ensembles ------------------------------------------------------------------------------


@ensembles_app.command("create", context_settings={"allow_interspersed_args": True})
@_errors
def ensembles_create(ctx: typer.Context,
                     more: Annotated[list[str] | None, typer.Argument(help="More members (after --members).",
                                                                      show_default=False)] = None,
                     members: Annotated[list[str] | None, typer.Option(
                         "--members", "-m", help="model:ID or trial:ID; repeat, separate with commas, or list them "
                                                 "after --members.")] = None,
                     method: Annotated[str, typer.Option(help="mean, nelder-mead or greedy.")] = "mean",
                     name: Annotated[str | None, typer.Option(help="The ensemble's name.")] = None,
                     greedy_rounds: Annotated[int | None, typer.Option(help="greedy: rounds (server default 50).")
                                              ] = None,
                     seed: Annotated[int | None, typer.Option(help="Seed (server default 0).")] = None,
                     wait: Annotated[bool, typer.Option(help="Wait until it is built.")] = False,
                     output: OutputOption = None):
    """Build an ensemble of models and trial checkpoints, e.g.
    `--members model:1 model:2 trial:7 --method nelder-mead --name trio`."""
    refs = [ref.strip() for item in [*(members or []), *(more or [])] for ref in item.split(",") if ref.strip()]
    bad = [ref for ref in refs if not _member_ok(ref)]
    if bad:
        raise Failure(f"Members are model:ID or trial:ID, not {', '.join(map(repr, bad))}.")
    if len(refs) < 2:
        raise Failure("An ensemble needs at least two members (--members model:1 model:2).")
    method = normalise_method(method)
    if method not in ENSEMBLE_METHODS:
        raise Failure(f"--method must be mean, nelder-mead or greedy, not {method!r}.")
    client = _client(ctx)
    ensemble = client.create_ensemble(refs, method=method, name=name, greedy_rounds=greedy_rounds, seed=seed)
    if wait:
        (ensemble,) = _wait_all(ctx, client, [ensemble], _output(ctx, output) == "json")
        if "members" not in ensemble and ensemble.get("id") is not None:
            try:
                ensemble = {**client.get_ensemble(ensemble["id"]), **ensemble}
            except TuneboardAPIError:
                pass
    _show_ensemble(ctx, output, ensemble)
    if wait and ensemble.get("status") != "completed":
        typer.echo(f"Error: ensemble {ensemble.get('id')} {ensemble.get('status')}: "
                   f"{ensemble.get('error') or 'no reason given'}", err=True)
        raise typer.Exit(1)


def _member_ok(ref: str) -> bool:
    kind, _, ident = ref.partition(":")
    return kind in ("model", "trial") and ident.isdigit()


def _show_ensemble(ctx: typer.Context, output: str | None, ensemble: dict) -> None:
    def show():
        _details(ensemble, [k for k in ("id", "name", "version", "method", "status", "val_metrics", "test_metrics",
                                        "weights", "error") if ensemble.get(k) not in (None, "", {}, [])])
        members = ensemble.get("members")
        if isinstance(members, list) and members and isinstance(members[0], dict):
            _table(members, [("MEMBER", lambda m: m.get("key") or m.get("ref")), ("LABEL", lambda m: m.get("label")),
                             ("WEIGHT", lambda m: m.get("weight"))])

    _emit(ctx, output, ensemble, show)


@ensembles_app.command("show")
@_errors
def ensembles_show(ctx: typer.Context, ensemble_id: int, output: OutputOption = None):
    """One ensemble: members, weights, metrics."""
    _show_ensemble(ctx, output, _client(ctx).get_ensemble(ensemble_id))


# --- leaderboard and workers ----------------------------------------------------------------


@app.command()
@_errors
def leaderboard(ctx: typer.Context, dataset: Annotated[str, typer.Argument(help="Dataset id or name.")],
                csv: Annotated[bool, typer.Option("--csv", help="The server's CSV.")] = False,
                output: OutputOption = None):
    """A dataset's models ranked by the team's ranking rule."""
    client = _client(ctx)
    if csv:
        typer.echo(client.leaderboard_csv(dataset), nl=False)
        return
    board = client.leaderboard(dataset)
    rows = board if isinstance(board, list) else (board.get("results") or board.get("rows") or [])
    metric = board.get("metric") if isinstance(board, dict) else None

    def show():
        if metric:
            typer.echo(f"Ranked by test {metric}")
        _table(rows, [
            ("RANK", lambda r: r.get("rank")), ("ID", lambda r: r.get("id")),
            ("MODEL", lambda r: r.get("label") or r.get("name")), ("KIND", lambda r: r.get("kind")),
            ("TEST", lambda r: r.get("test")), ("VAL", lambda r: r.get("val")),
            ("STUDY", lambda r: r.get("study")), ("WARNING", lambda r: r.get("warning")),
        ])

    _emit(ctx, output, board, show)


@workers_app.command("list")
@_errors
def workers_list(ctx: typer.Context, output: OutputOption = None):
    """The workers and their heartbeats."""
    rows = _client(ctx).list_workers()
    _emit(ctx, output, rows, lambda: _table(rows, [
        ("NAME", lambda w: w.get("name")), ("QUEUES", lambda w: w.get("queues")),
        ("CONCURRENCY", lambda w: w.get("concurrency")), ("ALIVE", lambda w: w.get("alive", w.get("is_alive"))),
        ("LAST HEARTBEAT", lambda w: w.get("last_heartbeat")),
    ]))


# --- the model registry -----------------------------------------------------------------------

registry_app = typer.Typer(help="Registered models: their versions, aliases and alias history.",
                           no_args_is_help=True)
alias_app = typer.Typer(help="Point aliases (production, staging, ...) at versions; roll a move back.",
                        no_args_is_help=True)
app.add_typer(registry_app, name="registry")
app.add_typer(alias_app, name="alias")


def _version(row: dict | None) -> str:
    return "—" if row is None else f"v{row}"


def _show_move(ctx: typer.Context, output: str | None, name: str, move: dict) -> None:
    to = f"version {move['to_version']}" if move.get("to_version") is not None else "removed"
    _emit(ctx, output, move, lambda: typer.echo(f"{name}@{move['alias']} is now {to} "
                                                f"(was {_version(move.get('from_version'))}; move {move['id']})."))


@app.command("register")
@_errors
def register(ctx: typer.Context, model_id: Annotated[int, typer.Argument(metavar="MODEL_ID")],
             name: Annotated[str, typer.Option("--as", help="The registered model (made if new).")],
             description: Annotated[str | None, typer.Option(help="Notes on this version.")] = None,
             output: OutputOption = None):
    """Register a finished model (or ensemble) as the next version of a registered model."""
    version = _client(ctx).register_model(model_id, name, description)
    _emit(ctx, output, version, lambda: typer.echo(f"{version['model_name']} is now version {version['version']} "
                                                   f"of {name}."))


@registry_app.command("list")
@_errors
def registry_list(ctx: typer.Context, output: OutputOption = None):
    """The team's registered models."""
    rows = _client(ctx).list_registered_models()
    _emit(ctx, output, rows, lambda: _table(rows, [
        ("ID", lambda r: r.get("id")), ("NAME", lambda r: r.get("name")),
        ("VERSIONS", lambda r: r.get("version_count")), ("LATEST", lambda r: _version(r.get("latest_version"))),
        ("ALIASES", lambda r: ", ".join(f"{a}→v{v}" for a, v in (r.get("aliases") or {}).items()) or "—"),
        ("TASK", lambda r: r.get("task")),
    ]))


@registry_app.command("show")
@_errors
def registry_show(ctx: typer.Context, ref: Annotated[str, typer.Argument(metavar="NAME", help="Name or id.")],
                  output: OutputOption = None):
    """One registered model: versions with their test metrics, aliases, and the alias history."""
    registered = _client(ctx).get_registered_model(ref)

    def show():
        _details(registered, ["id", "name", "task", "dataset_kind", "input_signature", "aliases"])
        _table(registered.get("versions") or [], [
            ("VERSION", lambda v: v.get("version")), ("MODEL", lambda v: f"{v.get('model_name')} ({v.get('model')})"),
            ("TEST", lambda v: _metrics(v.get("test_metrics"))),
            ("ALIASES", lambda v: ", ".join(v.get("aliases") or [])),
        ])
        _table(registered.get("moves") or [], [
            ("MOVE", lambda m: m.get("id")), ("WHEN", lambda m: m.get("created")), ("WHO", lambda m: m.get("user")),
            ("ALIAS", lambda m: m.get("alias")), ("FROM", lambda m: _version(m.get("from_version"))),
            ("TO", lambda m: _version(m.get("to_version"))),
        ])

    _emit(ctx, output, registered, show)


@alias_app.command("set")
@_errors
def alias_set(ctx: typer.Context, name: str, alias: str, version: int, output: OutputOption = None):
    """Point NAME@ALIAS at VERSION (the alias is made if new)."""
    _show_move(ctx, output, name, _client(ctx).set_alias(name, alias, version))


@alias_app.command("remove")
@_errors
def alias_remove(ctx: typer.Context, name: str, alias: str, output: OutputOption = None):
    """Remove NAME@ALIAS."""
    _show_move(ctx, output, name, _client(ctx).remove_alias(name, alias))


@alias_app.command("rollback")
@_errors
def alias_rollback(ctx: typer.Context, name: str, alias: str, output: OutputOption = None):
    """Undo the latest move of NAME@ALIAS (kept in the history as a move of its own)."""
    _show_move(ctx, output, name, _client(ctx).rollback_alias(name, alias))


# --- batch predictions ----------------------------------------------------------------------


@app.command()
@_errors
def predict(ctx: typer.Context,
            model_id: Annotated[int | None, typer.Argument(metavar="[MODEL_ID]",
                                                           help="A trained model or ensemble.")] = None,
            ref: Annotated[str | None, typer.Option("--ref", help="Or a registry reference: NAME@ALIAS "
                                                                   "(e.g. digits@production) or NAME/VERSION.")] = None,
            input_path: Annotated[Path | None, typer.Option(
                "--input", "-i", help="Inputs without labels: CSV rows, a zip or NPZ of images, a CSV of texts, "
                                      "an NPZ of sequences (as the model's dataset).")] = None,
            out: Annotated[Path | None, typer.Option("--out", "-o", help="Where to write the predictions (CSV).")
                           ] = None,
            npz: Annotated[Path | None, typer.Option(help="Also write the raw outputs (NPZ) here.")] = None):
    """Predict a file of inputs on the fleet (a job on the model's queue): wait for it, printing the
    rows done, then save the predictions as CSV (and NPZ)."""
    if (model_id is None) == (ref is None):
        raise Failure("Give a model id or --ref NAME@ALIAS (one of them).")
    if input_path is None or out is None:
        raise Failure("Give the inputs with --input FILE and where to write the CSV with -o FILE.")
    client = _client(ctx)
    job = client.create_prediction(input_path, model=model_id, reference=ref)
    via = f" ({ref}, version {job.get('registry_version')})" if ref else ""
    typer.echo(f"Prediction {job['id']}: {job['rows']} rows with model {job['model']}{via}.", err=True)

    def note(current: dict, _seen={"done": None, "status": None}) -> None:  # noqa: B006 - per-job memo
        if (current.get("rows_done"), current.get("status")) != (_seen["done"], _seen["status"]):
            _seen.update(done=current.get("rows_done"), status=current.get("status"))
            typer.echo(f"  {current.get('status')}: {current.get('rows_done')} / {current.get('rows')} rows", err=True)

    job = client.wait_prediction(job, interval=POLL_SECONDS, on_poll=note, sleep=POLL_SLEEP)
    if job.get("status") != "completed":
        raise Failure(f"prediction {job.get('id')} {job.get('status')}: {job.get('error') or 'no reason given'}")
    typer.echo(f"Saved {client.download_prediction(job['id'], 'csv', out)} (SHA-256 checked).")
    if npz is not None:
        typer.echo(f"Saved {client.download_prediction(job['id'], 'npz', npz)} (SHA-256 checked).")


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("Interrupted.", err=True)
        sys.exit(130)


if __name__ == "__main__":  # python -m tuneboard_client.cli
    main()
