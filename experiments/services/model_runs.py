"""Model runs: a TrainedModel (retrain, promotion or ensemble) from queued to finished.

A request saves one QUEUED row per model and sends its task once the transaction commits.
A worker claims a row with a conditional update (a duplicated delivery finds nothing to
claim); each claim is a new attempt, and every later write of that worker names its attempt
(the fence): once the reaper has queued the model again, or a user cancelled it, the old
worker's writes are refused and it stops. States and their moves: `experiments/states.py`.

The reaper re-sends QUEUED models whose task never reached a worker (a Redis restart, the
broker down at request time), and queues RUNNING models whose worker stopped heartbeating
again, once, before failing them with the reason."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Artifact, EnsembleMember, ModelFile, TrainedModel, TrainedModelEpoch
from experiments.services.audit import audit_record
from experiments.services.notifications import notify_model_lost, notify_model_ready
from experiments.services.queueing import model_task_enqueue
from experiments.services.trial_runs import resend_due
from experiments.states import MODEL_MOVES, ModelStatus, sources

log = logging.getLogger(__name__)
# A model whose worker died is queued again this many times before it is FAILED.
MAX_ATTEMPTS = 2


ENSEMBLE_QUEUE = "cpu"  # ensembles only predict and fit a few weights


def model_queue(model: TrainedModel) -> str:
    """Single models train where their study ran; ensembles (no study) on the CPU queue."""
    return model.study.queue if model.study_id else ENSEMBLE_QUEUE


def model_send(*, model: TrainedModel) -> None:
    """Send the model's task once the current transaction commits, and note when."""
    TrainedModel.objects.filter(pk=model.pk).update(last_sent=timezone.now())
    model_task_enqueue(model_pk=model.pk, queue=model_queue(model), unsent=job_unsent(TrainedModel, model.pk))


def job_unsent(table, pk: int):
    """What a send the broker refused undoes: the job counts as never sent (the reaper's next
    pass sends it) and the attempt is not a resend that went unanswered (no backoff)."""

    def unsent(_count: int) -> None:
        table.objects.filter(pk=pk, status=ModelStatus.QUEUED).update(
            last_sent=None, resends=Greatest(F("resends") - 1, 0))

    return unsent


# Every function below takes the table of the job (`table`): TrainedModel by default, or any
# table with the same lifecycle columns (status in ModelStatus, attempts, worker_host,
# heartbeat, started, finished, error, last_sent, resends), such as TrialRerun.


def job_move(model_pk: int, target: str, *, attempt: int | None = None, table=TrainedModel, **fields) -> bool:
    """One conditional UPDATE from any state that may reach `target` (and, with `attempt`,
    only while that attempt still owns the row)."""
    rows = table.objects.filter(pk=model_pk, status__in=sources(MODEL_MOVES, target))
    if attempt is not None:
        rows = rows.filter(status=ModelStatus.RUNNING, attempts=attempt)
    return bool(rows.update(status=target, **fields))


def _owned(model_pk: int, attempt: int, table=TrainedModel):
    return table.objects.filter(pk=model_pk, status=ModelStatus.RUNNING, attempts=attempt)


def job_claim(*, table, pk: int, worker_host: str) -> bool:
    """QUEUED -> RUNNING for exactly one worker, as a new attempt."""
    now = timezone.now()
    return bool(table.objects.filter(pk=pk, status=ModelStatus.QUEUED).update(
        status=ModelStatus.RUNNING, attempts=F("attempts") + 1, worker_host=worker_host, heartbeat=now,
        started=Coalesce(F("started"), now), error="", resends=0,
    ))


def model_claim(*, model_pk: int, worker_host: str) -> TrainedModel | None:
    """QUEUED -> RUNNING for exactly one worker; the returned row's `attempts` is the fence
    every later write passes."""
    with transaction.atomic():
        if not job_claim(table=TrainedModel, pk=model_pk, worker_host=worker_host):
            return None
        TrainedModelEpoch.objects.filter(model_id=model_pk).delete()  # an earlier attempt's curves
    return TrainedModel.objects.select_related("study", "trial__checkpoint", "dataset__arrays", "dataset__upload",
                                              "team").get(pk=model_pk)


def model_heartbeat(*, model_pk: int, attempt: int, table=TrainedModel) -> bool:
    return bool(_owned(model_pk, attempt, table).update(heartbeat=timezone.now()))


def model_record_epoch(*, model_pk: int, attempt: int, phase: str, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when this attempt no longer owns the model (stop)."""
    return job_record_epoch(table=TrainedModel, pk=model_pk, attempt=attempt, unique_fields=["model", "phase", "epoch"],
                            row=TrainedModelEpoch(model_id=model_pk, phase=phase, epoch=epoch, metrics=metrics))


def job_record_epoch(*, table, pk: int, attempt: int, row, unique_fields: list[str]) -> bool:
    """Store `row` (an epoch of the job, unsaved; a re-reported epoch replaces the earlier one,
    `unique_fields` say which) and bump the heartbeat; False when this attempt no longer owns
    the job (stop)."""
    with transaction.atomic():
        if not model_heartbeat(model_pk=pk, attempt=attempt, table=table):
            return False
        type(row).objects.bulk_create([row], update_conflicts=True, unique_fields=unique_fields,
                                      update_fields=["metrics"])
    return True


def model_complete(*, model_pk: int, attempt: int, best_epoch: int | None, epochs: int | None, val_metrics: dict,
                   test_metrics: dict, signature: dict, versions: dict, files: dict[str, Artifact],
                   duration_seconds: float, report: dict | None = None, members: list[dict] | None = None,
                   compute: dict | None = None, environment: dict | None = None) -> bool:
    """Everything at once: the row, its files and (for an ensemble) each member's weight and
    metrics, `members[i]` = {"weight", "val", "test"} in position order. False (and nothing
    written) when this attempt no longer owns the model."""
    with transaction.atomic():
        done = job_move(model_pk, ModelStatus.COMPLETED, attempt=attempt, best_epoch=best_epoch, epochs=epochs,
                        val_metrics=val_metrics, test_metrics=test_metrics, signature=signature, versions=versions,
                        duration_seconds=duration_seconds, report=report or {}, compute=compute or {},
                        environment=environment or {}, finished=timezone.now())
        if done:
            ModelFile.objects.bulk_create(
                [ModelFile(model_id=model_pk, format=fmt, artifact=artifact) for fmt, artifact in files.items()]
            )
            rows = EnsembleMember.objects.filter(ensemble_id=model_pk).order_by("position")
            for row, result in zip(rows, members or [], strict=False):
                row.weight, row.val_metrics, row.test_metrics = result["weight"], result["val"], result["test"]
                row.save(update_fields=["weight", "val_metrics", "test_metrics"])
            notify_model_ready(model_pk=model_pk)
    return done


def model_fail(*, model_pk: int, attempt: int, error: str) -> bool:
    return job_move(model_pk, ModelStatus.FAILED, attempt=attempt, error=error, finished=timezone.now())


def model_release(*, model_pk: int, attempt: int) -> bool:
    """Its worker is shutting down: the job goes back to the queue at once, without counting
    as a lost attempt (the next claim is still a new attempt, so this one's writes are fenced)."""
    with transaction.atomic():
        released = job_move(model_pk, ModelStatus.QUEUED, attempt=attempt, releases=F("releases") + 1,
                         error="", worker_host="")
        if released:
            model_send(model=TrainedModel.objects.select_related("study").get(pk=model_pk))
    return released


class ModelCancelError(TuneboardError):
    pass


@transaction.atomic
def model_cancel(*, model: TrainedModel) -> None:
    """A user stops a queued or running model; a running worker stops at its next epoch end."""
    if not job_move(model.pk, ModelStatus.CANCELLED, error="Cancelled by a user.", finished=timezone.now()):
        model.refresh_from_db(fields=["status"])
        raise ModelCancelError(f"The model is {model.get_status_display().lower()}; only a queued or running "
                               "model can be cancelled.")
    audit_record(verb="model.cancel", obj=model, team_id=model.team_id)


def models_reap(*, now=None) -> dict:
    """Lost RUNNING models are queued again (or failed after MAX_ATTEMPTS); QUEUED models
    whose task was sent long ago and never claimed are sent again. Each row on its own."""
    return jobs_reap(jobs=TrainedModel.objects.select_related("study"), send=lambda model: model_send(model=model),
                     now=now)


def jobs_reap(*, jobs, send, now=None) -> dict:
    """models_reap for any job table: `jobs` is its queryset (with what `send(row)` reads)."""
    now = now or timezone.now()
    table = jobs.model
    stale_before = now - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    lost = jobs.filter(status=ModelStatus.RUNNING, heartbeat__lt=stale_before)
    for model in lost:
        try:
            with transaction.atomic():
                still_lost = table.objects.filter(pk=model.pk, status=ModelStatus.RUNNING,
                                                  attempts=model.attempts, heartbeat__lt=stale_before)
                if model.attempts - getattr(model, "releases", 0) >= MAX_ATTEMPTS:
                    failed = still_lost.update(
                        status=ModelStatus.FAILED, finished=now,
                        error=f"Lost {model.attempts} times: the worker {model.worker_host} stopped heartbeating. "
                              "Request it again to retry.")
                    counts["failed"] += failed
                    if failed and table is TrainedModel:
                        notify_model_lost(model=model, requeued=False)
                elif still_lost.update(status=ModelStatus.QUEUED):
                    send(model)
                    if table is TrainedModel:
                        notify_model_lost(model=model, requeued=True)
                    counts["requeued"] += 1
        except Exception:
            log.exception("the reaper could not requeue %s %s; it tries again next time", table.__name__, model.pk)
    for model in jobs.filter(status=ModelStatus.QUEUED):
        if not resend_due(model.last_sent, model.resends, now):
            continue
        try:
            with transaction.atomic():
                if table.objects.filter(pk=model.pk, status=ModelStatus.QUEUED, last_sent=model.last_sent
                                        ).update(resends=F("resends") + 1):
                    send(model)
                    counts["resent"] += 1
        except Exception:
            log.exception("the reaper could not re-send %s %s; it tries again next time", table.__name__, model.pk)
    return counts
