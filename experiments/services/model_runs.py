"""Model runs: a TrainedModel (retrain, promotion or ensemble) from queued to finished — the job
lifecycle (services/jobs.py: claim with an attempt, fenced writes, heartbeat, release, reap,
re-send) on the TrainedModel table, plus what only models have: their queue, their files and
ensemble members at completion, and the notifications a user gets."""

from django.db import transaction
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Artifact, EnsembleMember, ModelFile, TrainedModel, TrainedModelEpoch
from experiments.services.audit import audit_record
from experiments.services.conversions import conversion_request
from experiments.services.jobs import (
    job_cancel,
    job_claim,
    job_fail,
    job_heartbeat,
    job_move,
    job_record_epoch,
    job_release,
    job_sent,
    job_unsent,
    jobs_reap,
)
from experiments.services.notifications import notify_model_lost, notify_model_ready
from experiments.services.queueing import model_task_enqueue
from experiments.signals import model_finished
from experiments.states import JobStatus
from experiments.tuning.compute_options import DEFAULT_BACKEND, task_queue

ENSEMBLE_QUEUE = "cpu"  # ensembles only predict and fit a few weights


def model_queue(model: TrainedModel) -> str:
    """Single models train where their study ran; ensembles (no study) on the CPU queue, of JAX
    workers when every member comes from a JAX study (so a fleet without TensorFlow builds them)."""
    if model.study_id:
        return model.study.task_queue
    members = model.members.select_related("model__study", "trial__study")
    backends = {(member.trial.study if member.trial_id else member.model.study).backend
                if member.trial_id or member.model.study_id else DEFAULT_BACKEND for member in members}
    return task_queue(ENSEMBLE_QUEUE, backends.pop()) if len(backends) == 1 else ENSEMBLE_QUEUE


def model_send(*, model: TrainedModel) -> None:
    """Send the model's task once the current transaction commits, and note when."""
    job_sent(table=TrainedModel, pk=model.pk)
    model_task_enqueue(model_pk=model.pk, queue=model_queue(model), unsent=job_unsent(TrainedModel, model.pk))


def model_claim(*, model_pk: int, worker_host: str) -> TrainedModel | None:
    """QUEUED -> RUNNING for exactly one worker; the returned row's `attempts` is the fence
    every later write passes."""
    with transaction.atomic():
        if not job_claim(table=TrainedModel, pk=model_pk, worker_host=worker_host):
            return None
        TrainedModelEpoch.objects.filter(model_id=model_pk).delete()  # an earlier attempt's curves
    return TrainedModel.objects.select_related("study", "trial__checkpoint", "dataset__arrays", "dataset__upload",
                                              "team").get(pk=model_pk)


def model_heartbeat(*, model_pk: int, attempt: int) -> bool:
    return job_heartbeat(table=TrainedModel, pk=model_pk, attempt=attempt)


def model_record_epoch(*, model_pk: int, attempt: int, phase: str, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when this attempt no longer owns the model (stop)."""
    return job_record_epoch(table=TrainedModel, pk=model_pk, attempt=attempt, unique_fields=["model", "phase", "epoch"],
                            row=TrainedModelEpoch(model_id=model_pk, phase=phase, epoch=epoch, metrics=metrics))


def model_complete(*, model_pk: int, attempt: int, best_epoch: int | None, epochs: int | None, val_metrics: dict,
                   test_metrics: dict, signature: dict, versions: dict, files: dict[str, Artifact],
                   duration_seconds: float, report: dict | None = None, members: list[dict] | None = None,
                   compute: dict | None = None, environment: dict | None = None,
                   pending_formats: list[str] | tuple = ()) -> bool:
    """Everything at once: the row, its files and (for an ensemble) each member's weight and
    metrics, `members[i]` = {"weight", "val", "test"} in position order. False (and nothing
    written) when this attempt no longer owns the model. `pending_formats`: the formats its
    worker could not make (no TensorFlow there), queued as a conversion of its `.keras` file on a
    TensorFlow worker (services/conversions.py) in the same transaction."""
    with transaction.atomic():
        done = job_move(table=TrainedModel, pk=model_pk, target=JobStatus.COMPLETED, attempt=attempt,
                        best_epoch=best_epoch, epochs=epochs, val_metrics=val_metrics, test_metrics=test_metrics,
                        signature=signature, versions=versions, duration_seconds=duration_seconds, report=report or {},
                        compute=compute or {}, environment=environment or {}, finished=timezone.now())
        if done:
            ModelFile.objects.bulk_create(
                [ModelFile(model_id=model_pk, format=fmt, artifact=artifact) for fmt, artifact in files.items()]
            )
            rows = EnsembleMember.objects.filter(ensemble_id=model_pk).order_by("position")
            for row, result in zip(rows, members or [], strict=False):
                row.weight, row.val_metrics, row.test_metrics = result["weight"], result["val"], result["test"]
                row.save(update_fields=["weight", "val_metrics", "test_metrics"])
            if pending_formats:
                conversion_request(model=TrainedModel(pk=model_pk), formats=pending_formats)
            notify_model_ready(model_pk=model_pk)
            # Recipe runs waiting on this retrain, or building this ensemble, move with it.
            model_finished.send(sender=TrainedModel, model_pk=model_pk, status=JobStatus.COMPLETED)
    return done


def model_fail(*, model_pk: int, attempt: int, error: str) -> bool:
    with transaction.atomic():
        failed = job_fail(table=TrainedModel, pk=model_pk, attempt=attempt, error=error)
        if failed:
            model_finished.send(sender=TrainedModel, model_pk=model_pk, status=JobStatus.FAILED, error=error)
    return failed


def _send_by_pk(model_pk: int) -> None:
    model_send(model=TrainedModel.objects.select_related("study").get(pk=model_pk))


def model_release(*, model_pk: int, attempt: int) -> bool:
    """Its worker is shutting down: queued again at once, not counted as lost (services/jobs.py)."""
    return job_release(table=TrainedModel, pk=model_pk, attempt=attempt, send=_send_by_pk)


class ModelCancelError(TuneboardError):
    pass


@transaction.atomic
def model_cancel(*, model: TrainedModel) -> None:
    """A user stops a queued or running model; a running worker stops at its next epoch end."""
    if not job_cancel(table=TrainedModel, pk=model.pk):
        model.refresh_from_db(fields=["status"])
        raise ModelCancelError(f"The model is {model.get_status_display().lower()}; only a queued or running "
                               "model can be cancelled.")
    audit_record(verb="model.cancel", obj=model, team_id=model.team_id)
    model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.CANCELLED,
                        error="Cancelled by a user.")


def models_reap(*, now=None) -> dict:
    """Lost RUNNING models are queued again (or failed after MAX_ATTEMPTS), with a notification;
    QUEUED models whose task was sent long ago and never claimed are sent again."""
    def on_lost(model: TrainedModel, requeued: bool) -> None:
        notify_model_lost(model=model, requeued=requeued)
        if not requeued:  # failed for good: recipe runs waiting on it fail too
            model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.FAILED,
                                error=f"lost {model.attempts} times (its worker stopped heartbeating)")

    return jobs_reap(jobs=TrainedModel.objects.select_related("study"), send=lambda model: model_send(model=model),
                     on_lost=on_lost, now=now)
