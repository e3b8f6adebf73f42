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
from experiments.services.jobs import JOB_KINDS, job_cancel, job_move, job_record_epoch
from experiments.services.notifications import notify_model_ready
from experiments.signals import model_finished
from experiments.states import JobStatus


def model_record_epoch(*, model_pk: int, attempt: int, phase: str, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when this attempt no longer owns the model (stop)."""
    return job_record_epoch(kind=JOB_KINDS["models"], pk=model_pk, attempt=attempt,
                            unique_fields=["model", "phase", "epoch"],
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
        done = job_move(kind=JOB_KINDS["models"], pk=model_pk, target=JobStatus.COMPLETED, attempt=attempt,
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


class ModelCancelError(TuneboardError):
    pass


@transaction.atomic
def model_cancel(*, model: TrainedModel) -> None:
    """A user stops a queued or running model; a running worker stops at its next epoch end."""
    if not job_cancel(kind=JOB_KINDS["models"], pk=model.pk):
        model.refresh_from_db(fields=["status"])
        raise ModelCancelError(f"The model is {model.get_status_display().lower()}; only a queued or running "
                               "model can be cancelled.")
    audit_record(verb="model.cancel", obj=model, team_id=model.team_id)
    model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.CANCELLED,
                        error="Cancelled by a user.")
