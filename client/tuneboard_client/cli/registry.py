"""`tuneboard register`, `tuneboard registry ...` and `tuneboard alias ...`: the model registry, its
versions and aliases."""

from __future__ import annotations

from typing import Annotated

import typer

from tuneboard_client.cli.common import OutputOption, _client, _details, _emit, _errors, _metrics, _table, app

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
             variant: Annotated[int | None, typer.Option(help="One of its made quantized variants (an id from "
                                                              "`tuneboard models variants`).")] = None,
             output: OutputOption = None):
    """Register a finished model (or ensemble, or one of its quantized variants) as the next version of a
    registered model."""
    version = _client(ctx).register_model(model_id, name, description, variant)
    made = f"{version['model_name']}'s {version['variant']['method']} variant" if version.get("variant") else \
        version["model_name"]
    _emit(ctx, output, version, lambda: typer.echo(f"{made} is now version {version['version']} of {name}."))


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
        _details(registered, ["id", "name", "task", "dataset_kind", "input_signature", "output_keys", "aliases"])
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

