"""Recipe runs: an ensemble recipe applied once, from picking candidates through the retrains it waits for to
one ensemble build, each step under a row lock so duplicate events move a run once."""

import logging

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from experiments.errors import TuneboardError
from experiments.models import EnsembleRecipe, RecipeRun, TrainedModel, Trial
from experiments.presentation import figures
from experiments.selectors.recipe_lists import ACTS_ONLY
from experiments.selectors.recipes import Candidate, Rule, candidates_fingerprint, recipe_candidates
from experiments.selectors.teams import editor_problem
from experiments.services.ensembles import EnsembleError, ensemble_create, ensemble_members_resolve
from experiments.services.recipe_outcomes import (
    recipe_run_finish,
    recipe_run_unchanged,
    registered_twin,
)
from experiments.services.trained_models import MAX_MODEL_NAME, ModelRequestError, trained_models_request
from experiments.states import JobStatus

log = logging.getLogger(__name__)
Status = RecipeRun.Status
UNFINISHED = (JobStatus.QUEUED, JobStatus.RUNNING)


class RecipeRunError(TuneboardError):
    """Why a recipe cannot run now; str(exc) is shown to the user (pages, API, CLI alike)."""


class RecipeRunBusy(RecipeRunError):
    """Run now while a run of the recipe is still waiting or building (the API's 409)."""


class RecipeRunStopped(RecipeRunError):
    """The member the run would act for may not change the team's models (left, or demoted)."""


def recipe_ensemble_name(recipe: EnsembleRecipe) -> str:
    """`recipe-<name>`: every run's ensemble is a new version of one model name."""
    return slugify(f"recipe-{recipe.name}")[:MAX_MODEL_NAME].rstrip("-_")


def _rule_record(recipe: EnsembleRecipe, candidates: list[Candidate]) -> dict:
    """The settings as applied (the recipe may be edited later) and the picked set's fingerprint,
    which the new_candidate trigger compares with."""
    fields = ("source_tag", "metric", "direction", "top_k", "per_group_max", "group_by", "include_pruned",
              "correlation_cap", "members_as", "method", "greedy_rounds", "register_as", "alias")
    return {"source_studies": sorted(recipe.source_studies.values_list("id", flat=True)),
            **{name: getattr(recipe, name) for name in fields},
            "fingerprint": candidates_fingerprint(candidates)}


def _refusal(picked: list[Candidate], candidates: list[Candidate]) -> str:
    if not candidates:
        return ("No candidate is picked today: the sources have no completed trial with the recipe's metric. "
                "Add sources or wait for a study to finish.")
    if not picked:
        reasons = sorted({c.why for c in candidates if c.why})
        return "No candidate is picked today (" + "; ".join(reasons) + "). An ensemble needs at least two members."
    return (f"Only 1 candidate is picked today: {figures.candidate_label(picked[0].as_dict())}. An ensemble needs at "
            "least two members: add a source study (another hypermodel), or raise K or the number per group.")


def _retrain_of(candidate: Candidate, user) -> TrainedModel:
    """A retrain of the trial already queued or running is reused (another run, or a person,
    asked for it): the same configuration is never trained twice at once."""
    running = (TrainedModel.objects.filter(trial_id=candidate.trial_id, kind=TrainedModel.Kind.SINGLE,
                                           method=TrainedModel.Method.RETRAIN, status__in=UNFINISHED)
               .order_by("created", "id").first())
    if running is not None:
        return running
    trial = Trial.objects.select_related("study").get(pk=candidate.trial_id)
    source = TrainedModel.EpochSource.RECORDED if trial.best_epoch else TrainedModel.EpochSource.DETECT
    (model,) = trained_models_request(study=trial.study, user=user, trials=[trial],
                                      method=TrainedModel.Method.RETRAIN, epoch_source=source)
    return model


def _fail(run: RecipeRun, error: str) -> None:
    run.status, run.error, run.finished = Status.FAILED, error, timezone.now()
    run.save(update_fields=["status", "error", "finished"])


def _build(run: RecipeRun, recipe: EnsembleRecipe) -> None:
    """WAITING (or new) -> BUILDING: the ensemble is created and sent to a worker with the recipe's correlation cap in
    its report."""
    problem = editor_problem(user=run.created_by, team_id=recipe.team_id)
    if problem:
        _fail(run, f"The run stopped before building its ensemble: {problem}. {ACTS_ONLY}")
        return
    twin = registered_twin(recipe=recipe, members=run.members)
    if twin is not None:
        recipe_run_unchanged(run=run, twin=twin)
        return
    try:
        with transaction.atomic():
            members = ensemble_members_resolve(team=recipe.team, keys=run.members)
            ensemble = ensemble_create(team=recipe.team, user=run.created_by, members=members, method=recipe.method,
                                       rounds=recipe.greedy_rounds or 50, name=recipe_ensemble_name(recipe))
            # Before the commit that sends its task: the worker reads the cap from this row.
            TrainedModel.objects.filter(pk=ensemble.pk).update(
                report={"correlation_cap": recipe.correlation_cap, "recipe_run": run.id})
    except (EnsembleError, ModelRequestError) as exc:
        _fail(run, f"The ensemble could not be built: {exc}")
        return
    run.status, run.ensemble = Status.BUILDING, ensemble
    run.save(update_fields=["status", "ensemble"])


def _busy(recipe: EnsembleRecipe) -> str:
    run = recipe.runs.filter(status__in=(Status.WAITING, Status.BUILDING)).order_by("-number").first()
    if run is None:
        return ""
    doing = "is waiting for its retrains" if run.status == Status.WAITING else "is building its ensemble"
    return (f"Run {run.number} of {recipe.name} {doing}: nothing was started. Run the recipe again once it has "
            "ended.")


def recipe_run_start(*, recipe: EnsembleRecipe, user, trigger: str = EnsembleRecipe.Trigger.MANUAL,
                     trigger_key: str = "", reason: str = "") -> RecipeRun | None:
    """Apply the recipe now, acting for `user`: the run, or None when `trigger_key` already started one (a duplicate
    delivery creates nothing)."""
    with transaction.atomic():
        # The recipe row's lock serialises starts: numbers count up without clashes, a trigger
        # key is checked and taken by one start at a time, and of two Run now clicks the second
        # finds the first's run (committed before the lock was released).
        recipe = EnsembleRecipe.objects.select_for_update().select_related("team").get(pk=recipe.pk)
        if trigger_key and recipe.runs.filter(trigger_key=trigger_key).exists():
            return None
        problem = editor_problem(user=user, team_id=recipe.team_id)
        if problem:
            raise RecipeRunStopped(f"No run was started: {problem}. {ACTS_ONLY}")
        busy = _busy(recipe) if trigger == EnsembleRecipe.Trigger.MANUAL else ""
        if busy:
            raise RecipeRunBusy(busy)
        candidates = recipe_candidates(Rule.of(recipe))
        picked = [c for c in candidates if c.picked]
        if len(picked) < 2:
            raise RecipeRunError(_refusal(picked, candidates))
        number = (recipe.runs.aggregate(n=Max("number"))["n"] or 0) + 1
        try:
            with transaction.atomic():
                run = RecipeRun.objects.create(recipe=recipe, number=number, trigger=trigger, trigger_key=trigger_key,
                                               reason=reason, rule=_rule_record(recipe, candidates),
                                               candidates=[c.as_dict() for c in candidates], created_by=user)
        except IntegrityError:
            return None  # the same event, started by a path that did not take the recipe lock first
        members, waiting = [], []
        try:
            with transaction.atomic():
                for candidate in picked:
                    if candidate.to_retrain:
                        model = _retrain_of(candidate, user)
                        members.append(f"model:{model.pk}")
                        waiting.append(model)
                    else:
                        members.append(candidate.key)
        except ModelRequestError as exc:
            _fail(run, f"A retrain could not be requested: {exc}")
            return run
        run.members = members
        run.save(update_fields=["members"])
        if waiting:
            run.waiting_on.set(waiting)
        else:
            _build(run, recipe)
    return run


def recipe_runs_on_model_finished(*, model_pk: int, status: str, error: str = "") -> None:
    """A retrain or an ensemble of some run finished (called inside its finishing transaction).
    A run waiting on it builds once all its retrains completed, or fails with the retrain's
    error; a run building it ends (services/recipe_outcomes.py)."""
    for run_id in RecipeRun.objects.filter(status=Status.WAITING, waiting_on=model_pk).values_list("id", flat=True):
        run = RecipeRun.objects.select_for_update().select_related("recipe__team").get(pk=run_id)
        if run.status != Status.WAITING:
            continue  # another finish moved it first
        if status != JobStatus.COMPLETED:
            model = TrainedModel.objects.get(pk=model_pk)
            _fail(run, f"The retrain {model} {status}: {error or 'no reason recorded'}")
        elif not run.waiting_on.exclude(status=JobStatus.COMPLETED).exists():
            _build(run, run.recipe)
    for run in RecipeRun.objects.select_for_update().filter(ensemble_id=model_pk, status=Status.BUILDING):
        recipe_run_finish(run=run, status=status, error=error)
