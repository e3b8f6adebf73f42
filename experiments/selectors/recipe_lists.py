"""Ensemble recipes as pages and the API list them: the team's recipes with their last run, one recipe, and its runs
with their members and what changed between runs."""

from django.db.models import OuterRef, Subquery

from experiments.models import EnsembleMember, EnsembleRecipe, RecipeRun, Team
from experiments.presentation import figures
from experiments.selectors.teams import editor_problem

ACTS_ONLY = "A recipe's runs act only for a current owner or editor of its team."


def team_recipes(*, team: Team) -> list[EnsembleRecipe]:
    last = RecipeRun.objects.filter(recipe=OuterRef("pk")).order_by("-number")
    return list(EnsembleRecipe.objects.filter(team=team).select_related("dataset", "acts_for").annotate(
        last_run_status=Subquery(last.values("status")[:1]), last_run_number=Subquery(last.values("number")[:1]),
    ).order_by("name"))


def team_recipe(*, team: Team, recipe_id: int) -> EnsembleRecipe | None:
    return EnsembleRecipe.objects.filter(team=team, pk=recipe_id).select_related("dataset", "acts_for").first()


def recipe_triggers_stopped(*, recipe: EnsembleRecipe) -> str:
    """Why the recipe's trigger starts no run now, in words; "" when it does (or it has none: Run
    now acts for whoever clicks it)."""
    if recipe.trigger == EnsembleRecipe.Trigger.MANUAL:
        return ""
    problem = editor_problem(user=recipe.acts_for, team_id=recipe.team_id)
    if not problem:
        return ""
    return (f"Triggered runs are stopped: {problem}. {ACTS_ONLY} An owner can take the recipe over; its runs then "
            "act for them.")


def recipe_runs(*, recipe: EnsembleRecipe) -> list[RecipeRun]:
    """Newest first, each with `member_rows` (its ensemble's members, weights), `member_labels`
    (its picks by name) and `changes`
    (members added and removed since the run before: the comparison's, else worked out here)."""
    runs = list(RecipeRun.objects.filter(recipe=recipe).select_related("ensemble", "registered")
                .order_by("-number"))
    ensemble_ids = [run.ensemble_id for run in runs if run.ensemble_id]
    members: dict[int, list[EnsembleMember]] = {}
    for row in (EnsembleMember.objects.filter(ensemble_id__in=ensemble_ids)
                .select_related("model", "trial__study").order_by("position")):
        row.display_label = figures.member_label(row)  # "trial N" as the study and preview number it
        members.setdefault(row.ensemble_id, []).append(row)
    for run in runs:
        run.member_rows = members.get(run.ensemble_id, [])
        # A run without an ensemble (one the registry already holds, or one that failed) names
        # its picks as the preview does, not by their keys ("trial:5").
        picked = [c for c in run.candidates or [] if isinstance(c, dict) and c.get("picked")]
        run.member_labels = [figures.candidate_label(c) for c in picked] or list(map(str, run.members or []))
    for run, previous in zip(runs, [*runs[1:], None][:len(runs)], strict=True):
        comparison = run.comparison if isinstance(run.comparison, dict) else {}
        changes = comparison.get("changes") if isinstance(comparison.get("changes"), dict) else None
        if changes is None and previous is not None:
            now, before = set(map(str, run.members or [])), set(map(str, previous.members or []))
            changes = {"added": sorted(now - before), "removed": sorted(before - now)}
        run.changes = changes or {}
        run.first = previous is None
    return runs
