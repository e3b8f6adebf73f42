"""`tuneboard workers list`: the workers that run trials and models."""

from __future__ import annotations

import typer

from tuneboard_client.cli.common import OutputOption, _client, _emit, _errors, _table, app

workers_app = typer.Typer(help="The workers that run trials and models.", no_args_is_help=True)
app.add_typer(workers_app, name="workers")


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

