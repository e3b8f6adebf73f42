"""`tuneboard recipe ...`: ensemble recipes (saved rules that pick an ensemble's members from a
dataset's studies), who they would pick today, and their runs."""

from __future__ import annotations

from typing import Annotated

import typer

from tuneboard_client.api import Client, TuneboardAPIError
from tuneboard_client.cli.common import (
    POLL_SECONDS,
    OutputOption,
    _client,
    _details,
    _emit,
    _errors,
    _metrics,
    _sleep,
    _table,
    app,
)

recipe_app = typer.Typer(help="Ensemble recipes: create, clone, preview who they pick, run them.",
                         no_args_is_help=True)
app.add_typer(recipe_app, name="recipe")

RUN_ACTIVE = ("waiting", "building")
RECIPE_KEYS = ["id", "name", "dataset", "source_studies", "source_tag", "metric", "direction", "top_k",
               "per_group_max", "group_by", "include_pruned", "correlation_cap", "members_as", "method",
               "greedy_rounds", "trigger", "register_as", "alias", "last_run_status", "acts_for", "triggers_stopped",
               "last_skipped"]


def _named(client: Client, path: str, ref: str, what: str, hint: str) -> int:
    """An id from an id, or from the name of one of the team's rows at `path`."""
    if str(ref).strip().isdigit():
        return int(ref)
    matches = [r for r in client.paginate(path) if r.get("name") == str(ref).strip()]
    if not matches:
        raise TuneboardAPIError(f"No {what} named {ref!r} on this team ({hint}).")
    if len(matches) > 1:
        raise TuneboardAPIError(f"{len(matches)} {what}s are named {ref!r}: give the id.")
    return int(matches[0]["id"])


def _recipe_id(client: Client, ref: str) -> int:
    return _named(client, "recipes/", ref, "recipe", "`tuneboard recipe list` shows them")


def _study_id(client: Client, ref: str) -> int:
    return _named(client, "studies/", ref, "study", "`tuneboard studies list` shows them")


def _wait(client: Client, recipe_id: int, number: int) -> dict:
    """Poll the run until it is neither waiting for members nor building."""
    while True:
        run = next((r for r in client.recipe_runs(recipe_id) if r.get("number") == number), None)
        if run is None:
            raise TuneboardAPIError(f"The recipe has no run {number}.")
        if run.get("status") not in RUN_ACTIVE:
            return run
        _sleep(POLL_SECONDS)


def _candidates(preview: dict) -> None:
    for warning in preview.get("warnings") or []:
        typer.echo(f"Warning: {warning}")
    _table(preview.get("candidates") or [], [
        ("PICKED", lambda c: "yes" if c.get("picked") else "no"), ("STUDY", lambda c: c.get("study_name")),
        ("TRIAL", lambda c: c.get("trial_number")), ("HYPERMODEL", lambda c: c.get("hypermodel")),
        ("VALUE", lambda c: c.get("value")), ("WHY", lambda c: c.get("why")),
    ])


def _side(comparison: dict, who: str, split: str) -> str:
    part = comparison.get(who) if isinstance(comparison.get(who), dict) else {}
    value = part.get(split)
    return _metrics(value) if isinstance(value, dict) else ("—" if value is None else str(value))


def _note(comparison: dict) -> str:
    if comparison.get("unchanged"):  # built nothing: the registry already holds its ensemble
        return comparison.get("verdict") or ""
    return "collapsed to its best member" if comparison.get("collapsed") else ""


def _runs(runs: list[dict]) -> None:
    _table(runs, [
        ("RUN", lambda r: r.get("number")), ("STATUS", lambda r: r.get("status")),
        ("TRIGGER", lambda r: r.get("trigger")), ("WHEN", lambda r: r.get("created")),
        ("MEMBERS", lambda r: len(r.get("members") or [])),
        ("ENSEMBLE VAL", lambda r: _side(r.get("comparison") or {}, "ensemble", "val")),
        ("BEST MEMBER VAL", lambda r: _side(r.get("comparison") or {}, "best_member", "val")),
        ("PROMOTED", lambda r: "yes" if r.get("promoted") else "no"),
        ("NOTE", lambda r: r.get("error") or _note(r.get("comparison") or {})),
    ])


@recipe_app.command("list")
@_errors
def recipe_list(ctx: typer.Context, output: OutputOption = None):
    """The team's recipes."""
    rows = _client(ctx).list_recipes()
    _emit(ctx, output, rows, lambda: _table(rows, [
        ("ID", lambda r: r.get("id")), ("NAME", lambda r: r.get("name")), ("DATASET", lambda r: r.get("dataset")),
        ("METHOD", lambda r: r.get("method")), ("TRIGGER", lambda r: r.get("trigger")),
        ("LAST RUN", lambda r: r.get("last_run_status") or "—"),
    ]))


@recipe_app.command("show")
@_errors
def recipe_show(ctx: typer.Context, ref: Annotated[str, typer.Argument(metavar="ID", help="Id or name.")],
                output: OutputOption = None):
    """One recipe: its rule and its runs."""
    client = _client(ctx)
    recipe = client.get_recipe(_recipe_id(client, ref))
    runs = client.recipe_runs(recipe["id"])

    def show():
        _details(recipe, RECIPE_KEYS)
        _runs(runs)

    _emit(ctx, output, {**recipe, "runs": runs}, show)


@recipe_app.command("create")
@_errors
def recipe_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Option(help="The recipe's name (lower-case letters, digits, '-' and '_').")],
    dataset: Annotated[str, typer.Option(help="Dataset id or name.")],
    study: Annotated[list[str] | None, typer.Option("--study", help="A source study (id or name); repeat.")] = None,
    tag: Annotated[str | None, typer.Option(help="Every study of the dataset with this tag.")] = None,
    top_k: Annotated[int | None, typer.Option("--top-k", help="Top K trials per study (default 3).")] = None,
    per_group_max: Annotated[int | None, typer.Option("--per-group-max", help="At most M per group.")] = None,
    group_by: Annotated[str | None, typer.Option("--group-by", help="hypermodel or study.")] = None,
    metric: Annotated[str | None, typer.Option(help="Ranking metric (default val_loss).")] = None,
    direction: Annotated[str | None, typer.Option(help="min or max.")] = None,
    include_pruned: Annotated[bool, typer.Option("--include-pruned", help="Pruned trials are candidates.")] = False,
    correlation_cap: Annotated[float | None, typer.Option("--correlation-cap", help="Above 0, at most 1.")] = None,
    members_as: Annotated[str | None, typer.Option("--members-as", help="checkpoint, retrained or existing.")] = None,
    method: Annotated[str | None, typer.Option(help="mean, nelder_mead, greedy or stacking.")] = None,
    greedy_rounds: Annotated[int | None, typer.Option("--greedy-rounds")] = None,
    trigger: Annotated[str | None, typer.Option(help="manual, study_completed or new_candidate.")] = None,
    register_as: Annotated[str | None, typer.Option("--register-as", help="Register each run's ensemble.")] = None,
    alias: Annotated[str | None, typer.Option(help="Alias moved when a run beats it (needs --register-as).")] = None,
    description: Annotated[str | None, typer.Option()] = None,
    output: OutputOption = None,
):
    """Save a recipe (checked as the page checks it: the same messages)."""
    client = _client(ctx)
    fields = {
        "name": name, "dataset": client.resolve_dataset(dataset),
        "source_studies": [_study_id(client, s) for s in study or []], "source_tag": tag, "top_k": top_k,
        "per_group_max": per_group_max, "group_by": group_by, "metric": metric, "direction": direction,
        "include_pruned": include_pruned, "correlation_cap": correlation_cap, "members_as": members_as,
        "method": method.replace("-", "_") if method else None, "greedy_rounds": greedy_rounds, "trigger": trigger,
        "register_as": register_as, "alias": alias, "description": description,
    }
    recipe = client.create_recipe(fields)
    _emit(ctx, output, recipe, lambda: typer.echo(f"Saved recipe {recipe['name']} (id {recipe['id']})."))


@recipe_app.command("clone")
@_errors
def recipe_clone(ctx: typer.Context, ref: Annotated[str, typer.Argument(metavar="ID", help="Id or name.")],
                 name: Annotated[str, typer.Option(help="The copy's name.")], output: OutputOption = None):
    """Copy a recipe's rule under a new name (without its runs)."""
    client = _client(ctx)
    copy = client.clone_recipe(_recipe_id(client, ref), name)
    _emit(ctx, output, copy, lambda: typer.echo(f"Cloned as {copy['name']} (id {copy['id']})."))


@recipe_app.command("preview")
@_errors
def recipe_preview(ctx: typer.Context, ref: Annotated[str, typer.Argument(metavar="ID", help="Id or name.")],
                   output: OutputOption = None):
    """Who the recipe would pick today: every candidate, picked or not, and why."""
    client = _client(ctx)
    preview = client.recipe_preview(_recipe_id(client, ref))
    _emit(ctx, output, preview, lambda: _candidates(preview))


@recipe_app.command("run")
@_errors
def recipe_run(ctx: typer.Context, ref: Annotated[str, typer.Argument(metavar="ID", help="Id or name.")],
               wait: Annotated[bool, typer.Option("--wait", help="Wait until the run completes or fails.")] = False,
               reason: Annotated[str | None, typer.Option(help="Shown beside the run.")] = None,
               output: OutputOption = None):
    """Run the recipe now with today's candidates."""
    client = _client(ctx)
    recipe_id = _recipe_id(client, ref)
    run = client.run_recipe(recipe_id, reason)
    if wait:
        run = _wait(client, recipe_id, run["number"])

    def show():
        typer.echo(f"Run {run['number']}: {run['status']}.")
        if run.get("error"):
            typer.echo(run["error"])
        if wait:
            _runs([run])

    _emit(ctx, output, run, show)
    if wait and run.get("status") == "failed":
        raise typer.Exit(1)
