"""`tuneboard datasets ...` and `tuneboard leaderboard`: the team's datasets and their ranked models."""

from __future__ import annotations

from typing import Annotated

import typer

from tuneboard_client.cli.common import OutputOption, _client, _details, _emit, _errors, _table, app

datasets_app = typer.Typer(help="The team's datasets.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


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

