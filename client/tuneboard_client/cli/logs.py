"""`tuneboard logs trial STUDY TRIAL` and `tuneboard logs model MODEL`: what a run printed."""

from __future__ import annotations

from typing import Annotated

import typer

from tuneboard_client.cli.common import OutputOption, _client, _emit, _errors, app

logs_app = typer.Typer(help="What a trial or model printed while it ran.", no_args_is_help=True)
app.add_typer(logs_app, name="logs")


def _print_runs(runs: list[dict]) -> None:
    if not runs:
        typer.echo("No log yet: it appears once a worker starts the run.")
    for number, run in enumerate(runs, start=1):
        if len(runs) > 1:
            running = " still running" if run["running"] else ""
            typer.echo(f"===== run {number} (attempt {run['attempt']}){running} =====")
        typer.echo(run["text"], nl=False)


@logs_app.command("trial")
@_errors
def logs_trial(ctx: typer.Context, study_id: Annotated[int, typer.Argument(metavar="STUDY")],
               trial_pk: Annotated[int, typer.Argument(metavar="TRIAL")], output: OutputOption = None):
    """A trial's log (TRIAL: the id in its page's address), every run of it."""
    runs = _client(ctx).get(f"studies/{study_id}/trials/{trial_pk}/logs/")
    _emit(ctx, output, runs, lambda: _print_runs(runs))


@logs_app.command("model")
@_errors
def logs_model(ctx: typer.Context, model_id: Annotated[int, typer.Argument(metavar="MODEL")],
               output: OutputOption = None):
    """A trained model's log (its retraining or ensembling), every run of it."""
    runs = _client(ctx).get(f"models/{model_id}/logs/")
    _emit(ctx, output, runs, lambda: _print_runs(runs))
