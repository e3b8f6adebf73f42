"""The job-kind table (JOB_KINDS: one row per kind) and the moves every job but a trial shares, so the
reaper, probes, scaling, queueing and the worker's runner iterate one table (docs/design/job-lifecycle.md)."""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from experiments.models import (
    ModelConversion,
    ModelFile,
    PredictionJob,
    ServingExport,
    TrainedModel,
    TrainedModelEpoch,
    TrialRerun,
    TrialRerunEpoch,
)
from experiments.models.jobs import Job
from experiments.selectors.serving_exports import serving_base_path, serving_folder, serving_plan
from experiments.services.notifications import notify_model_lost
from experiments.services.queueing import job_task_enqueue
from experiments.services.resends import resend_due
from experiments.signals import model_finished
from experiments.states import JOB_MOVES, JobStatus, sources
from experiments.tuning.compute_options import DEFAULT_BACKEND, task_queue

log = logging.getLogger(__name__)
# A job whose worker died is queued again this many times before it is FAILED.
MAX_ATTEMPTS = 2
# Ensembles only predict and fit a few weights.
ENSEMBLE_QUEUE = "cpu"
# Converting (SavedModel, TFLite from a .keras file) is light and needs TensorFlow, whose workers
# serve the accelerator queues under their own names (compute_options): the CPU queue.
CONVERSION_QUEUE = task_queue("cpu", DEFAULT_BACKEND)
# Unzipping SavedModels needs no TensorFlow and no accelerator: the cpu queue, whose workers
# mount the serving volume (docker-compose.yml, deploy/kubernetes/overlays/serving).
SERVING_EXPORT_QUEUE = task_queue("cpu", DEFAULT_BACKEND)


@dataclass(frozen=True)
class JobKind:
    """One kind of job: everything the shared moves, the reaper, the probes and the worker's
    runner need to know about it. `task` is the only place its Celery task name is written."""

    name: str  # its key in JOB_KINDS, the reaper's counts and the scaling endpoint's fields
    label: str  # how a person names one row ("conversion 7")
    table: type[Job]
    task: str
    team: str  # the path from a row to its team's id (device time by team)
    queue_of: Callable[[Job], str]  # a row's queue (the row loaded with send_related)
    # Where its queue comes from, for counting by queue: the path from a row to the study it
    # follows (None: none), and the queue of rows that follow no study.
    study: str | None = None
    queue: str | None = None
    send_related: tuple[str, ...] = ()
    claim_related: tuple[str, ...] = ()
    reset: Callable[[int], None] | None = None  # in the claim's transaction: an earlier attempt's output goes
    prepare: Callable[[Job], Job] | None = None  # what a claim adds to the row the worker gets
    on_lost: Callable[[Job, bool], None] | None = None  # (row, requeued) once the reaper moved it
    on_fail: Callable[[int, str], None] | None = None  # (pk, error) in the transaction that failed it


def model_queue(model: TrainedModel) -> str:
    """Single models train where their study ran; ensembles (no study) on the CPU queue, of JAX
    workers when every member comes from a JAX study (so a fleet without TensorFlow builds them)."""
    if model.study_id:
        return model.study.task_queue
    members = model.members.select_related("model__study", "trial__study")
    backends = {(member.trial.study if member.trial_id else member.model.study).backend
                if member.trial_id or member.model.study_id else DEFAULT_BACKEND for member in members}
    return task_queue(ENSEMBLE_QUEUE, backends.pop()) if len(backends) == 1 else ENSEMBLE_QUEUE


def _with_keras_file(row):
    """`keras_artifact`: the model's `.keras` file, or None when it has none."""
    file = row.model.files.filter(format=ModelFile.Format.KERAS).select_related("artifact").first()
    row.keras_artifact = None if file is None else file.artifact
    return row


def _with_plan(export: ServingExport) -> ServingExport:
    """`plan` (serving_plan as it stands now; serving_export_write reads it again once the folder
    is locked), `folder` and `base_path`."""
    export.plan = serving_plan(team=export.team)
    export.folder = serving_folder(team=export.team)
    export.base_path = serving_base_path(team=export.team)
    return export


def _model_lost(model: TrainedModel, requeued: bool) -> None:
    notify_model_lost(model=model, requeued=requeued)
    if not requeued:  # failed for good: recipe runs waiting on it fail too
        model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.FAILED,
                            error=f"lost {model.attempts} times (its worker stopped heartbeating)")


def _model_failed(pk: int, error: str) -> None:
    model_finished.send(sender=TrainedModel, model_pk=pk, status=JobStatus.FAILED, error=error)


# In the order the reaper's counts and the scaling endpoint's fields list them.
JOB_KINDS: dict[str, JobKind] = {kind.name: kind for kind in (
    JobKind(name="models", label="model", table=TrainedModel, task="workers.tasks.make_trained_model", team="team_id",
            queue_of=model_queue, study="study", queue=ENSEMBLE_QUEUE, send_related=("study",),
            claim_related=("study", "trial__checkpoint", "dataset__arrays", "dataset__upload", "team"),
            reset=lambda pk: TrainedModelEpoch.objects.filter(model_id=pk).delete(),
            on_lost=_model_lost, on_fail=_model_failed),
    JobKind(name="reruns", label="re-run", table=TrialRerun, task="workers.tasks.rerun_trial",
            team="trial__study__team_id",
            queue_of=lambda rerun: rerun.trial.study.task_queue, study="trial__study",
            send_related=("trial__study",),
            claim_related=("trial__study__dataset__arrays", "trial__study__dataset__upload", "trial__study__team"),
            reset=lambda pk: TrialRerunEpoch.objects.filter(rerun_id=pk).delete()),
    JobKind(name="conversions", label="conversion", table=ModelConversion, task="workers.tasks.convert_model",
            team="model__team_id",
            queue_of=lambda _row: CONVERSION_QUEUE, queue=CONVERSION_QUEUE,
            claim_related=("model__team",), prepare=_with_keras_file),
    JobKind(name="serving_exports", label="serving export", table=ServingExport, team="team_id",
            task="workers.tasks.export_serving", queue_of=lambda _row: SERVING_EXPORT_QUEUE,
            queue=SERVING_EXPORT_QUEUE, claim_related=("team",), prepare=_with_plan),
    # A prediction runs where its model trained.
    JobKind(name="predictions", label="prediction", table=PredictionJob, task="workers.tasks.predict_batch",
            team="model__team_id",
            queue_of=lambda job: model_queue(job.model), study="model__study", queue=ENSEMBLE_QUEUE,
            send_related=("model",), claim_related=("model__dataset", "model__team", "inputs"),
            reset=lambda pk: PredictionJob.objects.filter(pk=pk).update(rows_done=0), prepare=_with_keras_file),
)}


def _unsent(kind: JobKind, pk: int):
    """What a send the broker refused undoes: the job counts as never sent (the reaper's next
    pass sends it) and the attempt is not a resend that went unanswered (no backoff)."""

    def unsent(_count: int) -> None:
        kind.table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
            last_sent=None, resends=Greatest(F("resends") - 1, 0))

    return unsent


def job_send(*, kind: JobKind, row: Job) -> None:
    """Send the job's task on its queue once the transaction commits, and note when (the reaper
    re-sends it if nobody claims it). `row` loaded with the kind's send_related."""
    kind.table.objects.filter(pk=row.pk).update(last_sent=timezone.now())
    job_task_enqueue(kind=kind, pk=row.pk, queue=kind.queue_of(row), unsent=_unsent(kind, row.pk))


def job_move(*, kind: JobKind, pk: int, target: str, attempt: int | None = None, **fields) -> bool:
    """One conditional UPDATE from any state that may reach `target` (and, with `attempt`,
    only while that attempt still owns the row)."""
    rows = kind.table.objects.filter(pk=pk, status__in=sources(JOB_MOVES, target))
    if attempt is not None:
        rows = rows.filter(status=JobStatus.RUNNING, attempts=attempt)
    return bool(rows.update(status=target, **fields))


def job_claim(*, kind: JobKind, pk: int, worker_host: str) -> Job | None:
    """QUEUED -> RUNNING for exactly one worker, as a new attempt; None when someone else has it
    (or it is not queued). The returned row's `attempts` is the fence every later write passes,
    and it carries what the worker needs (the kind's claim_related and prepare)."""
    now = timezone.now()
    with transaction.atomic():
        if not kind.table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
                status=JobStatus.RUNNING, attempts=F("attempts") + 1, worker_host=worker_host, heartbeat=now,
                started=Coalesce(F("started"), now), error="", resends=0):
            return None
        if kind.reset is not None:
            kind.reset(pk)
    row = kind.table.objects.select_related(*kind.claim_related).get(pk=pk)
    return kind.prepare(row) if kind.prepare is not None else row


def job_heartbeat(*, kind: JobKind, pk: int, attempt: int) -> bool:
    """False when this attempt no longer owns the job: its worker stops."""
    return bool(kind.table.objects.filter(pk=pk, status=JobStatus.RUNNING, attempts=attempt)
                .update(heartbeat=timezone.now()))


def job_record_epoch(*, kind: JobKind, pk: int, attempt: int, row, unique_fields: list[str]) -> bool:
    """Store `row` (an epoch of the job, unsaved; a re-reported epoch replaces the earlier one,
    `unique_fields` say which) and bump the heartbeat; False when this attempt no longer owns
    the job (stop)."""
    with transaction.atomic():
        if not job_heartbeat(kind=kind, pk=pk, attempt=attempt):
            return False
        type(row).objects.bulk_create([row], update_conflicts=True, unique_fields=unique_fields,
                                      update_fields=["metrics"])
    return True


def job_fail(*, kind: JobKind, pk: int, attempt: int, error: str, environment: dict | None = None) -> bool:
    """FAILED with the reason a person reads; False when this attempt no longer owns the job."""
    fields = {} if environment is None else {"environment": environment}
    with transaction.atomic():
        failed = job_move(kind=kind, pk=pk, target=JobStatus.FAILED, attempt=attempt, error=error,
                          finished=timezone.now(), **fields)
        if failed and kind.on_fail is not None:
            kind.on_fail(pk, error)
    return failed


def job_release(*, kind: JobKind, pk: int, attempt: int) -> bool:
    """Its worker is shutting down: the job goes back to the queue at once, without counting
    as a lost attempt (the next claim is still a new attempt, so this one's writes are fenced),
    and its task is sent again."""
    with transaction.atomic():
        released = job_move(kind=kind, pk=pk, target=JobStatus.QUEUED, attempt=attempt,
                            releases=F("releases") + 1, error="", worker_host="")
        if released:
            job_send(kind=kind, row=kind.table.objects.select_related(*kind.send_related).get(pk=pk))
    return released


def job_add_device_time(*, kind: JobKind, pk: int, attempt: int, seconds: float, device_kind: str,
                        devices: int) -> bool:
    """Add one run's device time (its wall time × the devices its worker child held) to the job,
    whatever became of the run: a failed or handed-back attempt held its devices too."""
    return bool(kind.table.objects.filter(pk=pk, attempts=attempt).update(
        device_seconds=Coalesce(F("device_seconds"), 0.0) + seconds * devices, device_kind=device_kind))


def job_cancel(*, kind: JobKind, pk: int) -> bool:
    """A user stops a queued or running job; a running worker stops at its next fenced write."""
    return job_move(kind=kind, pk=pk, target=JobStatus.CANCELLED, error="Cancelled by a user.",
                    finished=timezone.now())


def jobs_reap(*, kind: JobKind, now=None) -> dict:
    """Lost RUNNING jobs are queued again (or failed after MAX_ATTEMPTS, the kind's on_lost told
    either way); QUEUED jobs whose task was sent long ago and never claimed are sent again. Each
    row on its own."""
    now = now or timezone.now()
    table = kind.table
    jobs = table.objects.select_related(*kind.send_related)
    stale_before = now - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    counts = {"requeued": 0, "failed": 0, "resent": 0}
    for job in jobs.filter(status=JobStatus.RUNNING, heartbeat__lt=stale_before):
        try:
            with transaction.atomic():
                still_lost = table.objects.filter(pk=job.pk, status=JobStatus.RUNNING,
                                                  attempts=job.attempts, heartbeat__lt=stale_before)
                if job.attempts - job.releases >= MAX_ATTEMPTS:
                    failed = still_lost.update(
                        status=JobStatus.FAILED, finished=now,
                        error=f"Lost {job.attempts} times: the worker {job.worker_host} stopped heartbeating. "
                              "Request it again to retry.")
                    counts["failed"] += failed
                    if failed and kind.on_lost:
                        kind.on_lost(job, False)
                elif still_lost.update(status=JobStatus.QUEUED):
                    job_send(kind=kind, row=job)
                    if kind.on_lost:
                        kind.on_lost(job, True)
                    counts["requeued"] += 1
        except Exception:
            log.exception("the reaper could not requeue %s %s; it tries again next time", table.__name__, job.pk)
    for job in jobs.filter(status=JobStatus.QUEUED):
        if not resend_due(job.last_sent, job.resends, now):
            continue
        try:
            with transaction.atomic():
                if table.objects.filter(pk=job.pk, status=JobStatus.QUEUED, last_sent=job.last_sent
                                        ).update(resends=F("resends") + 1):
                    job_send(kind=kind, row=job)
                    counts["resent"] += 1
        except Exception:
            log.exception("the reaper could not re-send %s %s; it tries again next time", table.__name__, job.pk)
    return counts
