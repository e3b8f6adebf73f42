"""`tuneboard studies ...` and `tuneboard trials ...`: create, start, follow and inspect studies
and their trials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tuneboard_client import study_file
from tuneboard_client.cli.common import (
    POLL_SECONDS,
    OutputOption,
    _client,
    _details,
    _emit,
    _errors,
    _json,
    _label,
    _metrics,
    _output,
    _sleep,
    _table,
    app,
)

studies_app = typer.Typer(help="Create, start, follow and inspect studies.", no_args_is_help=True)
trials_app = typer.Typer(help="A study's trials.", no_args_is_help=True)
app.add_typer(studies_app, name="studies")
app.add_typer(trials_app, name="trials")


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
@studies_app.command("create")
@_errors
def studies_create(ctx: typer.Context,
                   file: Annotated[Path, typer.Option("--file", "-f", help="The YAML study file.")],
                   start: Annotated[bool | None, typer.Option("--start/--no-start",
                                                              help="Start it at once (default: the file's "
                                                                   "`start:`, else no).")] = None,
                   output: OutputOption = None):
    """Create a study from a YAML study file (its format: docs/reference/study-file.md)."""
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
                                     sleep=_sleep)
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
        study = _client(ctx).study_action(study_id, action)
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


@studies_app.command("extend")
@_errors
def studies_extend(ctx: typer.Context, study_id: int,
                   max_trials: Annotated[int | None, typer.Option(help="In all, above the trials so far.")] = None,
                   epochs: Annotated[int | None, typer.Option(help="Per trial; only raised.")] = None,
                   device_hours: Annotated[float | None, typer.Option(help="The device-hour budget in all.")] = None,
                   tuner: Annotated[str | None, typer.Option(help="Switch to this tuner; it is told every trial so "
                                                                   "far.")] = None,
                   output: OutputOption = None):
    """Run a completed, cancelled or failed study again: more trials, epochs or device-hours, or another tuner."""
    study = _client(ctx).extend_study(study_id, max_trials=max_trials, epochs=epochs, stop_device_hours=device_hours,
                                      tuner=tuner)
    _emit(ctx, output, study, lambda: typer.echo(
        f"Study {study_id} {study.get('status')}: {study.get('tuner')}, up to {study.get('max_trials')} trials of "
        f"{study.get('epochs')} epochs."))


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
        _sleep(POLL_SECONDS)

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

