"""What starts and moves recipe runs by itself: lifecycle events heard here, handled so a recipe's trouble never
breaks the event (docs/design/job-lifecycle.md, "Ensemble recipes")."""

import logging

from django.db import transaction
from django.utils import timezone

from experiments.models import EnsembleRecipe, Study, TrainedModel
from experiments.selectors.recipes import Rule, candidates_fingerprint, recipe_candidates, recipe_sources
from experiments.services.recipe_runs import (
    RecipeRunError,
    recipe_run_start,
    recipe_runs_on_model_finished,
)
from experiments.signals import model_finished, study_completed, trial_finished

log = logging.getLogger(__name__)
Trigger = EnsembleRecipe.Trigger


def _recipes(study: Study, trigger: str) -> list[EnsembleRecipe]:
    """The team's recipes of the study's dataset with `trigger` that have the study as a source
    (cheap first: one indexed query; sources only for those few)."""
    found = []
    for recipe in (EnsembleRecipe.objects.filter(team_id=study.team_id, dataset_id=study.dataset_id, trigger=trigger)
                   .select_related("acts_for")):
        if any(source.id == study.id for source in recipe_sources(Rule.of(recipe))):
            found.append(recipe)
    return found


def _start(recipe: EnsembleRecipe, **options) -> None:
    try:
        run = recipe_run_start(recipe=recipe, user=recipe.acts_for, **options)
    except RecipeRunError as exc:  # its member may not act (RecipeRunStopped), or fewer than two picks
        # Kept on the recipe either way: a trigger that starts nothing says why on its page, not only in a log.
        log.info("recipe %s (%s) did not start: %s", recipe.pk, options.get("trigger_key"), exc)
        EnsembleRecipe.objects.filter(pk=recipe.pk).update(
            last_skipped=f"{options.get('reason') or 'A trigger fired.'} {exc}", last_skipped_at=timezone.now())
    except Exception:
        log.exception("recipe %s (%s) could not start", recipe.pk, options.get("trigger_key"))
    else:
        if run is not None and recipe.last_skipped:
            EnsembleRecipe.objects.filter(pk=recipe.pk).update(last_skipped="", last_skipped_at=None)


def recipes_on_study_completed(*, study_id: int) -> None:
    """One run per recipe per completion: the key "study:<id>" is taken once, however often the
    completion is delivered."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None or study.status != Study.Status.COMPLETED:
        return
    for recipe in _recipes(study, Trigger.STUDY_COMPLETED):
        _start(recipe, trigger=Trigger.STUDY_COMPLETED, trigger_key=f"study:{study.id}",
               reason=f"Study {study.name} completed.")


def recipes_on_new_candidate(*, study_id: int) -> None:
    """A source's trial or retrain finished: a run when the picked set differs from the last
    run's (a set already run — same fingerprint, same key — never runs twice)."""
    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return
    for recipe in _recipes(study, Trigger.NEW_CANDIDATE):
        try:
            candidates = recipe_candidates(Rule.of(recipe))
        except Exception:
            log.exception("recipe %s: candidates could not be computed", recipe.pk)
            continue
        if sum(c.picked for c in candidates) < 2:
            continue
        fingerprint = candidates_fingerprint(candidates)
        last = recipe.runs.order_by("-number").first()
        if last is not None and last.rule.get("fingerprint") == fingerprint:
            continue
        _start(recipe, trigger=Trigger.NEW_CANDIDATE, trigger_key=f"candidates:{fingerprint}",
               reason="A new model entered the candidates.")


def _after_commit(hook, **kwargs) -> None:
    def run() -> None:
        try:
            hook(**kwargs)
        except Exception:
            log.exception("recipe trigger %s%s failed", hook.__name__, kwargs)

    transaction.on_commit(run)


def _on_model_finished(sender, *, model_pk: int, status: str, error: str = "", **_) -> None:
    try:
        with transaction.atomic():  # a savepoint: the model's finish stands whatever happens here
            recipe_runs_on_model_finished(model_pk=model_pk, status=status, error=error)
    except Exception:
        log.exception("recipe runs of model %s could not move", model_pk)
    row = (TrainedModel.objects.filter(pk=model_pk, kind=TrainedModel.Kind.SINGLE, study__isnull=False)
           .values("study_id", "status").first())
    if row and row["status"] == TrainedModel.Status.COMPLETED:
        _after_commit(recipes_on_new_candidate, study_id=row["study_id"])


def _on_study_completed(sender, *, study_id: int, **_) -> None:
    _after_commit(recipes_on_study_completed, study_id=study_id)


def _on_trial_finished(sender, *, trial_pk: int, study_id: int, **_) -> None:
    _after_commit(recipes_on_new_candidate, study_id=study_id)


def connect() -> None:
    model_finished.connect(_on_model_finished, dispatch_uid="tuneboard-recipe-model-finished")
    study_completed.connect(_on_study_completed, dispatch_uid="tuneboard-recipe-study-completed")
    trial_finished.connect(_on_trial_finished, dispatch_uid="tuneboard-recipe-trial-finished")


__all__ = ["connect", "recipes_on_new_candidate", "recipes_on_study_completed"]
