"""How a recipe run ends: its ensemble's figures beside the best member and the mean, whether it
collapsed to one member (and why), what changed since the recipe's last completed run, and the
champion/challenger step — register the ensemble, and move the alias only when it beats the
alias's current version on validation loss (the figure the ensemble's weights were chosen by)."""

import logging

from django.db import transaction
from django.utils import timezone

from experiments.models import ModelAlias, RecipeRun, RegisteredModel, TrainedModel
from experiments.presentation import figures
from experiments.services.registry import RegistryError, registry_alias_set, registry_register
from experiments.states import ModelStatus

log = logging.getLogger(__name__)
METRIC = "loss"
ONE_MEMBER = 0.999  # a weight this large leaves the others nothing that shows in a figure
# Above this validation correlation two members are "too alike"; below it a collapse means the
# others were simply worse (adding them would only dilute the best).
ALIKE = 0.95


def candidate_label(candidate: dict) -> str:
    """A member as runs name it: its trial, stable across runs (a retrain's model version is not)."""
    return f"{candidate['study_name']} trial {candidate['trial_number']}"


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
    now = [candidate_label(c) for c in run.candidates if c.get("picked")]
    if previous is None:
        return {"added": now, "removed": [], "previous_run": None}
    before = [candidate_label(c) for c in previous.candidates if c.get("picked")]
    return {"added": [m for m in now if m not in before], "removed": [m for m in before if m not in now],
            "previous_run": previous.number}


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
    user = recipe.created_by
    try:
        with transaction.atomic():
            version = registry_register(team=recipe.team, model=model, name=recipe.register_as, user=user,
                                        description=f"Recipe {recipe.name}, run {run.number}")
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
        champion = {"version": current.version.version, "val": selection_loss(current.version.trained_model)}
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
                registry_alias_set(registered=registered, alias=recipe.alias, version=version.version, user=user)
        except RegistryError as exc:
            better, verdict = False, f"not promoted: {exc}"
    run.promoted = better
    comparison["verdict"] = verdict


def recipe_run_finish(*, run: RecipeRun, status: str, error: str = "") -> None:
    """BUILDING -> COMPLETED (the comparison recorded, champion/challenger done) or FAILED with
    the ensemble's error. The caller holds the run's lock, inside the ensemble's finish."""
    run.finished = timezone.now()
    if status != ModelStatus.COMPLETED:
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
