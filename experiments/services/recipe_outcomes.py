"""How a recipe run ends: its ensemble's figures and the champion/challenger step that moves an alias only when
the ensemble beats its current version on validation loss."""

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from experiments.models import (
    EnsembleMember,
    EnsembleRecipe,
    ModelAlias,
    ModelVersion,
    RecipeRun,
    RegisteredModel,
    TrainedModel,
)
from experiments.presentation import figures
from experiments.selectors.recipe_lists import ACTS_ONLY
from experiments.selectors.teams import editor_problem
from experiments.services.registry import RegistryError, registry_alias_set, registry_register
from experiments.states import JobStatus

log = logging.getLogger(__name__)
METRIC = "loss"
ONE_MEMBER = 0.999  # a weight this large leaves the others nothing that shows in a figure
# Above this validation correlation two members are "too alike"; below it a collapse means the
# others were simply worse (adding them would only dilute the best).
ALIKE = 0.95


def _loss(metrics: dict | None) -> float | None:
    value = (metrics or {}).get(METRIC)
    return float(value) if isinstance(value, int | float) else None


def _figures(entry: dict | None) -> dict:
    entry = entry or {}
    return {"val": _loss(entry.get("val")), "test": _loss(entry.get("test")),
            "val_metrics": entry.get("val") or {}, "test_metrics": entry.get("test") or {}}


def collapse(report: dict, names: dict | None = None) -> tuple[bool, str]:
    """Whether the ensemble is one member in disguise, and why: the members too alike (their
    validation correlation), or the others dropped by the recipe's correlation cap. `names` maps
    the worker's member labels to the pages' (see `_page_labels`)."""
    weights = [float(w) for w in report.get("weights") or []]
    labels = report.get("members") or [str(i + 1) for i in range(len(weights))]
    labels = [(names or {}).get(label, label) for label in labels]
    kept = [i for i, w in enumerate(weights) if w > 0]
    if not weights or (len(kept) > 1 and max(weights) < ONE_MEMBER):
        return False, ""
    top = max(range(len(weights)), key=lambda i: weights[i])
    correlation = report.get("correlation") or []
    others = [j for j in range(len(weights)) if j != top]
    advice = "Try members of other hypermodels or studies (a lower per-group maximum, more sources)."
    if others and len(correlation) == len(weights):
        closest = max(others, key=lambda j: correlation[top][j])
        r = correlation[top][closest]
        if report.get("dropped_reasons") and len(kept) == 1:
            return True, (f"members too alike: correlation {r:.3f} between {labels[top]} and {labels[closest]}; "
                          f"the recipe's correlation cap ({report.get('correlation_cap')}) left only {labels[top]}. "
                          f"{advice}")
        if r >= ALIKE:
            return True, (f"members too alike: correlation {r:.3f} between {labels[top]} and {labels[closest]}, so "
                          f"the fit put all the weight on {labels[top]}. {advice}")
        return True, (f"the other members are weaker than {labels[top]} without being different enough to help "
                      f"(correlation at most {r:.3f}), so the fit put all the weight on it. Try stronger members of "
                      f"other hypermodels (a longer search of each), or stacking.")
    return True, f"all the weight is on {labels[top]}. {advice}"


def _page_labels(model: TrainedModel, report: dict) -> dict:
    """The worker labels a trial member by KerasTuner's id ("study trial 0"); the pages (the study,
    the preview, the ensemble's page) by its 1-based number ("study trial 1"): worker label -> page label."""
    worker = report.get("members") or []
    members = list(model.members.select_related("model", "trial__study").order_by("position"))
    if len(worker) != len(members):
        return {}
    return {str(label): figures.member_label(member) for label, member in zip(worker, members, strict=True)}


def _changes(run: RecipeRun) -> dict:
    previous = (RecipeRun.objects.filter(recipe_id=run.recipe_id, status=RecipeRun.Status.COMPLETED,
                                         number__lt=run.number).order_by("-number").first())
    now = [figures.candidate_label(c) for c in run.candidates if c.get("picked")]
    if previous is None:
        return {"added": now, "removed": [], "previous_run": None}
    before = [figures.candidate_label(c) for c in previous.candidates if c.get("picked")]
    return {"added": [m for m in now if m not in before], "removed": [m for m in before if m not in now],
            "previous_run": previous.number}


@dataclass(frozen=True)
class Twin:
    """A version of the recipe's registered model whose ensemble is the one a run would build."""

    version: ModelVersion
    role: str  # "the champion" (the alias's version), "the last version", or ""

    @property
    def verdict(self) -> str:
        role = f" ({self.role})" if self.role else ""
        return f"same members, method and inputs as v{self.version.version}{role}: nothing registered"


def _member_keys(ensemble_ids: list[int]) -> dict[int, list[str]]:
    keys: dict[int, list[str]] = {}
    for row in EnsembleMember.objects.filter(ensemble_id__in=ensemble_ids).values("ensemble_id", "model_id",
                                                                                   "trial_id"):
        key = f"model:{row['model_id']}" if row["model_id"] else f"trial:{row['trial_id']}"
        keys.setdefault(row["ensemble_id"], []).append(key)
    return keys


def registered_twin(*, recipe: EnsembleRecipe, members: list[str]) -> Twin | None:
    """The registered version that already is the ensemble the recipe would build (same members, method, options,
    dataset), so it is not registered twice."""
    if not recipe.register_as or not members or any(not key.startswith(("model:", "trial:")) for key in members):
        return None
    registered = RegisteredModel.objects.filter(team_id=recipe.team_id, name=recipe.register_as).first()
    if registered is None:
        return None
    greedy = recipe.method == TrainedModel.Method.GREEDY
    versions = list(registered.versions.filter(
        variant__isnull=True,  # a quantized variant of the ensemble is not the ensemble the recipe builds
        trained_model__kind=TrainedModel.Kind.ENSEMBLE, trained_model__dataset_id=recipe.dataset_id,
        trained_model__method=recipe.method, trained_model__seed=0,  # ensemble_create's, as _build calls it
        **({"trained_model__greedy_rounds": recipe.greedy_rounds or 50} if greedy else {}),
    ).select_related("trained_model").order_by("-version"))
    if not versions:
        return None
    champion = (ModelAlias.objects.filter(registered_model=registered, name=recipe.alias)
                .values_list("version_id", flat=True).first() if recipe.alias else None)
    newest = registered.versions.order_by("-version").values_list("id", flat=True).first()
    keys = _member_keys([v.trained_model_id for v in versions])
    wanted = sorted(members)
    for version in sorted(versions, key=lambda v: v.id != champion):
        model = version.trained_model
        if (model.report or {}).get("correlation_cap") != recipe.correlation_cap:
            continue
        if sorted(keys.get(model.id, [])) == wanted:
            role = ("the champion" if version.id == champion else
                    "the last version" if version.id == newest else "")
            return Twin(version=version, role=role)
    return None


def recipe_run_unchanged(*, run: RecipeRun, twin: Twin) -> None:
    """A run whose ensemble the registry already holds ends at once: nothing built or registered,
    and the run says which version it equals (the caller holds the run's lock, or made it)."""
    run.status, run.finished = RecipeRun.Status.COMPLETED, timezone.now()
    run.comparison = {"metric": METRIC, "unchanged": {"version": twin.version.version,
                                                      "model": twin.version.trained_model_id},
                      "champion": None, "rule": "", "verdict": twin.verdict, "changes": _changes(run)}
    run.save(update_fields=["status", "comparison", "finished"])


def selection_loss(model: TrainedModel) -> float | None:
    """The validation loss champion/challenger compares. A stacked ensemble's validation figure
    is its meta-learner's in-sample refit on those very rows, which flatters it (and would make a
    stacked champion unbeatable): its cross-validated loss on them stands in."""
    fit = (model.report or {}).get("fit") or {}
    if fit.get("val_loss_in_sample") and isinstance(fit.get("cv_loss"), int | float):
        return float(fit["cv_loss"])
    return _loss(model.val_metrics)


def _champion_challenger(run: RecipeRun, model: TrainedModel, comparison: dict) -> None:
    recipe = run.recipe
    challenger = selection_loss(model)
    comparison.update({"champion": None, "challenger_val": challenger, "rule": "", "verdict": "not registered"})
    if not recipe.register_as:
        return
    # The member the run acts for makes the registry changes (and is their audit rows' actor);
    # one who has left or been demoted since the run started makes none.
    user = run.created_by
    problem = editor_problem(user=user, team_id=recipe.team_id)
    if problem:
        comparison["verdict"] = f"not registered: {problem}. {ACTS_ONLY}"
        return
    # Another run may have registered these very members while this one built.
    twin = registered_twin(recipe=recipe, members=run.members)
    if twin is not None:
        comparison.update({"verdict": twin.verdict, "unchanged": {"version": twin.version.version,
                                                                  "model": twin.version.trained_model_id}})
        return
    via = {"recipe": recipe.name, "run": run.number}
    try:
        with transaction.atomic():
            version = registry_register(team=recipe.team, model=model, name=recipe.register_as, user=user,
                                        description=f"Recipe {recipe.name}, run {run.number}", via=via)
    except RegistryError as exc:
        comparison.update({"verdict": "not registered", "registry_error": str(exc)})
        return
    run.registered = version
    if not recipe.alias:
        comparison["verdict"] = "registered, no alias"
        return
    registered = RegisteredModel.objects.get(pk=version.registered_model_id)
    current = (ModelAlias.objects.filter(registered_model=registered, name=recipe.alias)
               .select_related("version__trained_model").first())
    champion = None
    if current is not None:
        # A quantized variant's validation loss is not measured (its figures are on the test split): not comparable,
        # so it is kept, as a champion without a recorded loss is.
        champion = {"version": current.version.version, "val": None if current.version.variant_id
                    else selection_loss(current.version.trained_model)}
    comparison["champion"] = champion
    if champion is None:
        comparison["rule"] = f"moves {recipe.alias} only when validation loss is lower than the current version's"
        better, verdict = True, "first version"
    else:
        shown = "unknown" if champion["val"] is None else f"{champion['val']:.4g}"
        comparison["rule"] = (f"moves {recipe.alias} only when validation loss is lower than the current "
                              f"version's ({shown}); a stacked ensemble counts its cross-validated loss")
        # A champion without a recorded validation loss cannot be beaten on it: kept.
        better = challenger is not None and champion["val"] is not None and challenger < champion["val"]
        verdict = "promoted" if better else "kept the champion"
    if better:
        try:
            with transaction.atomic():
                registry_alias_set(registered=registered, alias=recipe.alias, version=version.version, user=user,
                                   via=via)
        except RegistryError as exc:
            better, verdict = False, f"not promoted: {exc}"
    run.promoted = better
    comparison["verdict"] = verdict


def recipe_run_finish(*, run: RecipeRun, status: str, error: str = "") -> None:
    """BUILDING -> COMPLETED (the comparison recorded, champion/challenger done) or FAILED with
    the ensemble's error. The caller holds the run's lock, inside the ensemble's finish."""
    run.finished = timezone.now()
    if status != JobStatus.COMPLETED:
        run.status, run.error = RecipeRun.Status.FAILED, f"The ensemble {status}: {error or 'no reason recorded'}"
        run.save(update_fields=["status", "error", "finished"])
        return
    model = TrainedModel.objects.get(pk=run.ensemble_id)
    report = model.report or {}
    outcome = report.get("comparison") or {}
    names = _page_labels(model, report)
    collapsed, why = collapse(report, names)
    best = outcome.get("best_member") or {}
    comparison = {
        "metric": METRIC,
        "ensemble": _figures(outcome.get("ensemble")),
        "best_member": {"label": names.get(best.get("label", ""), best.get("label", "")), **_figures(best)},
        "mean": _figures(outcome.get("mean")),
        "collapsed": collapsed, "collapsed_reason": why,
        "dropped": report.get("dropped_reasons") or {},
        "changes": _changes(run),
    }
    _champion_challenger(run, model, comparison)
    run.status, run.comparison = RecipeRun.Status.COMPLETED, comparison
    run.save(update_fields=["status", "comparison", "registered", "promoted", "finished"])
