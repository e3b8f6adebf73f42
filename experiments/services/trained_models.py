"""Trained models: requested from the web (retrain or promote trials), made on a worker.

A request saves one QUEUED row per trial and wakes a worker per row once the transaction
commits. The worker claims a row with a conditional update (a duplicated task finds nothing
to claim), heartbeats while training, and completes it with its files in one transaction."""

from django.db import transaction
from django.db.models import F, Max, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.text import slugify

from experiments.models import Artifact, EnsembleMember, ModelFile, Study, Team, TrainedModel, TrainedModelEpoch, Trial
from experiments.services.queueing import model_task_enqueue

MAX_EPOCH_CAP = 1000
# A model whose worker died is queued again this many times before it is FAILED.
MAX_ATTEMPTS = 2


class ModelRequestError(Exception):
    """Why a retrain/promote request cannot be saved; str(exc) is shown to the user."""


def default_model_name(study: Study) -> str:
    return slugify(study.name)[:80] or f"study-{study.id}"


def last_version_locked(*, team_id: int, name: str) -> int:
    """The highest version of `name` in the team, holding the team row's lock until the
    transaction ends: versions count up per (team, name) without gaps or clashes."""
    Team.objects.select_for_update().get(pk=team_id)
    return TrainedModel.objects.filter(team_id=team_id, name=name).aggregate(v=Max("version"))["v"] or 0


def check_model_name(name: str) -> str:
    if slugify(name) != name:
        raise ModelRequestError(f"The model name {name!r} may hold only lower-case letters, digits, '-' and '_'.")
    return name


def trained_models_request(*, study: Study, user, trials: list[Trial], method: str,
                           epoch_source: str = TrainedModel.EpochSource.DETECT, epoch_cap: int = 100,
                           name: str = "") -> list[TrainedModel]:
    """Queue one model per trial; all of them or, on any problem, none."""
    name = check_model_name(name.strip() or default_model_name(study))
    if method not in TrainedModel.Method.values:
        raise ModelRequestError(f"Unknown method {method!r}.")
    if method == TrainedModel.Method.RETRAIN and epoch_source not in TrainedModel.EpochSource.values:
        raise ModelRequestError(f"Unknown best-epoch source {epoch_source!r}.")
    if not 1 <= epoch_cap <= MAX_EPOCH_CAP:
        raise ModelRequestError(f"The epoch cap must be between 1 and {MAX_EPOCH_CAP}.")
    if not trials:
        raise ModelRequestError("The study has no completed trial to train a model from.")
    for trial in trials:
        if trial.study_id != study.id or trial.status != Trial.Status.COMPLETED:
            raise ModelRequestError(f"Trial {trial.trial_id} has not completed; only completed trials make models.")
        if method == TrainedModel.Method.PROMOTE and trial.checkpoint_id is None:
            raise ModelRequestError(f"Trial {trial.trial_id} has no checkpoint to promote; retrain it instead.")
        if (method == TrainedModel.Method.RETRAIN and epoch_source == TrainedModel.EpochSource.RECORDED
                and not trial.best_epoch):
            raise ModelRequestError(f"Trial {trial.trial_id} has no recorded best epoch; detect it instead.")
    with transaction.atomic():
        last = last_version_locked(team_id=study.team_id, name=name)
        models = [
            TrainedModel.objects.create(
                team_id=study.team_id, dataset_id=study.dataset_id, study=study, trial=trial, name=name,
                version=last + i, method=method,
                epoch_source=epoch_source if method == TrainedModel.Method.RETRAIN else "",
                epoch_cap=epoch_cap, seed=study.seed + trial.number, hyperparameters=trial.hyperparameters,
                created_by=user,
            )
            for i, trial in enumerate(trials, start=1)
        ]
        for model in models:
            model_task_enqueue(model_pk=model.pk, queue=study.queue)
    return models


def trained_model_claim(*, model_pk: int, worker_host: str, stale_before) -> TrainedModel | None:
    """QUEUED -> RUNNING for exactly one worker; a RUNNING row whose heartbeat is older than
    `stale_before` (its worker died, the task was redelivered) may be taken over."""
    now = timezone.now()
    with transaction.atomic():
        claimed = TrainedModel.objects.filter(
            Q(status=TrainedModel.Status.QUEUED) | Q(status=TrainedModel.Status.RUNNING, heartbeat__lt=stale_before),
            pk=model_pk,
        ).update(status=TrainedModel.Status.RUNNING, attempts=F("attempts") + 1, worker_host=worker_host,
                 heartbeat=now, started=Coalesce(F("started"), now), error="")
        if not claimed:
            return None
        TrainedModelEpoch.objects.filter(model_id=model_pk).delete()  # an earlier attempt's curves
    return TrainedModel.objects.select_related("study", "trial__checkpoint", "dataset__arrays", "team").get(pk=model_pk)


def trained_model_heartbeat(*, model_pk: int) -> bool:
    return bool(TrainedModel.objects.filter(pk=model_pk, status=TrainedModel.Status.RUNNING)
                .update(heartbeat=timezone.now()))


def trained_model_record_epoch(*, model_pk: int, phase: str, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when the model is no longer running (stop training)."""
    if not trained_model_heartbeat(model_pk=model_pk):
        return False
    TrainedModelEpoch.objects.bulk_create(
        [TrainedModelEpoch(model_id=model_pk, phase=phase, epoch=epoch, metrics=metrics)],
        update_conflicts=True, unique_fields=["model", "phase", "epoch"], update_fields=["metrics"],
    )
    return True


def trained_model_complete(*, model_pk: int, best_epoch: int | None, epochs: int | None, val_metrics: dict,
                           test_metrics: dict, signature: dict, versions: dict, files: dict[str, Artifact],
                           duration_seconds: float, report: dict | None = None,
                           members: list[dict] | None = None) -> bool:
    """Everything at once: the row, its files and (for an ensemble) each member's weight and
    metrics, `members[i]` = {"weight", "val", "test"} in position order."""
    with transaction.atomic():
        updated = TrainedModel.objects.filter(pk=model_pk, status=TrainedModel.Status.RUNNING).update(
            status=TrainedModel.Status.COMPLETED, best_epoch=best_epoch, epochs=epochs, val_metrics=val_metrics,
            test_metrics=test_metrics, signature=signature, versions=versions, duration_seconds=duration_seconds,
            report=report or {}, finished=timezone.now(),
        )
        if updated:
            ModelFile.objects.bulk_create(
                [ModelFile(model_id=model_pk, format=fmt, artifact=artifact) for fmt, artifact in files.items()]
            )
            rows = EnsembleMember.objects.filter(ensemble_id=model_pk).order_by("position")
            for row, result in zip(rows, members or [], strict=False):
                row.weight, row.val_metrics, row.test_metrics = result["weight"], result["val"], result["test"]
                row.save(update_fields=["weight", "val_metrics", "test_metrics"])
    return bool(updated)


def trained_model_fail(*, model_pk: int, error: str) -> None:
    TrainedModel.objects.filter(pk=model_pk).exclude(status=TrainedModel.Status.COMPLETED).update(
        status=TrainedModel.Status.FAILED, error=error, finished=timezone.now()
    )


def trained_models_requeue_lost(*, stale_before) -> int:
    """Models whose worker stopped heartbeating: queue them again (a fresh start on any
    worker), or fail them with the reason after MAX_ATTEMPTS."""
    requeued = 0
    lost = TrainedModel.objects.filter(status=TrainedModel.Status.RUNNING, heartbeat__lt=stale_before)
    for model in lost.select_related("study"):
        queue = model.study.queue if model.study else "cpu"
        if model.attempts >= MAX_ATTEMPTS:
            trained_model_fail(model_pk=model.pk, error=f"Lost {model.attempts} times: the worker "
                               f"{model.worker_host} stopped heartbeating. Request it again to retry.")
            continue
        with transaction.atomic():
            if TrainedModel.objects.filter(pk=model.pk, status=TrainedModel.Status.RUNNING,
                                           heartbeat__lt=stale_before).update(status=TrainedModel.Status.QUEUED):
                model_task_enqueue(model_pk=model.pk, queue=queue)
                requeued += 1
    return requeued
