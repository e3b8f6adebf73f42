"""The moves every job but a trial shares (claim, heartbeat, fail, release, reap), over the job-kind
table of services/job_kinds.py (docs/design/job-lifecycle.md)."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from experiments.models.jobs import Job
from experiments.services.fair_share import job_next_in_line, job_quota_locked
from experiments.services.job_kinds import JOB_KINDS, JobKind
from experiments.services.queueing import job_task_enqueue
from experiments.services.resends import resend_due
from experiments.states import JOB_MOVES, JobStatus, sources
from experiments.tuning.compute_options import JAX_SUFFIX

log = logging.getLogger(__name__)
# A job whose worker died is queued again this many times before it is FAILED.
MAX_ATTEMPTS = 2


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


@dataclass(frozen=True)
class StudyTurn:
    """A job's message offered its slot to a study first in line: the worker claims that study's trial
    (services/trial_claims.claim_offered_trial), else, when it has none to give, the job itself (job_claim_own)."""

    study_id: int


def job_claim(*, kind: JobKind, pk: int, worker_host: str) -> Job | StudyTurn | None:
    """QUEUED -> RUNNING for exactly one worker, as a new attempt; None when someone else has it
    (or it is not queued). The returned row's `attempts` is the fence every later write passes,
    and it carries what the worker needs (the kind's claim_related and prepare) and its kind
    (`job_kind`). The message's slot goes where fair share puts it first (services/fair_share.py):
    another job, of any kind, claimed here, or a study's trial (StudyTurn)."""
    first = job_next_in_line(kind=kind, pk=pk)
    if first is not None and first.job is None:
        return StudyTurn(first.study_id)
    if first is not None:
        row = _claim(JOB_KINDS[first.kind], first.study_id, worker_host, own_message=False)
        if row is not None and row is not LOST_RACE:
            job_send_again(kind=kind, pk=pk)
            return row
        # Another worker took the job in line first, or a quota holds it (and polls it): this message's own job.
    return job_claim_own(kind=kind, pk=pk, worker_host=worker_host)


def job_claim_own(*, kind: JobKind, pk: int, worker_host: str, own_message: bool = True) -> Job | None:
    """job_claim of exactly this job, whatever fair share would put first. `own_message`: the message
    being handled is this job's (False: a slot another message offered; a quota that holds the job
    then leaves its own message to poll, and sends none)."""
    row = _claim(kind, pk, worker_host, own_message=own_message)
    return None if row is LOST_RACE else row


def job_send_again(*, kind: JobKind, pk: int) -> None:
    """This message served other work, already claimed: the job it was sent for gets one of its own (and
    its resend clock starts again), so every queued job keeps a message and none is spent twice. Never
    raises: a retry would claim again; a send that failed is the reaper's to make."""
    try:
        for job in kind.table.objects.select_related(*kind.send_related).filter(pk=pk, status=JobStatus.QUEUED):
            job_send(kind=kind, row=job)
    except DatabaseError:
        log.warning("%s %s: its message was not sent again", kind.label, pk, exc_info=True)


LOST_RACE = object()  # the conditional UPDATE found the job no longer queued


def _claim(kind: JobKind, pk: int, worker_host: str, *, own_message: bool = True):
    now = timezone.now()
    with transaction.atomic():
        if _quota_held(kind, pk, now, poll=own_message):
            return None
        if not kind.table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
                status=JobStatus.RUNNING, attempts=F("attempts") + 1, worker_host=worker_host, heartbeat=now,
                started=Coalesce(F("started"), now), attempt_started=now, attempt_devices=1, error="", resends=0,
                queue_wait=""):
            return LOST_RACE
        if kind.reset is not None:
            kind.reset(pk)
    row = kind.table.objects.select_related(*kind.claim_related).get(pk=pk)
    row.job_kind = kind
    return kind.prepare(row) if kind.prepare is not None else row


def _quota_held(kind: JobKind, pk: int, now, *, poll: bool = True) -> bool:
    """The job's team is at a quota on the accelerator queue its work runs on: the job stays QUEUED
    saying why and, with `poll` (the message handled is its own), its message is spent and one is sent
    again QUOTA_POLL_SECONDS later, as a held study asks again (one message in flight per held job; the
    reaper's resend stays for a lost one). Checked under the team's policy-row lock, as trials are."""
    row = kind.table.objects.select_related(*kind.send_related).filter(pk=pk, status=JobStatus.QUEUED).first()
    if row is None:
        return False
    team_id = kind.table.objects.filter(pk=pk).values_list(kind.team, flat=True).first()
    queue = kind.queue_of(row)
    reason = job_quota_locked(team_id=team_id, queue=queue.removesuffix(JAX_SUFFIX))
    if reason is None:
        return False
    if not poll:
        kind.table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(queue_wait=reason)
        return True
    kind.table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(queue_wait=reason, last_sent=now)
    job_task_enqueue(kind=kind, pk=pk, queue=queue, countdown=settings.QUOTA_POLL_SECONDS,
                     unsent=_unsent(kind, pk))
    return True


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


def job_hold_devices(*, kind: JobKind, pk: int, attempt: int, devices: int) -> bool:
    """The devices this attempt's worker child holds (what it will record with its device time), so the
    quotas count its run so far on as many."""
    return bool(kind.table.objects.filter(pk=pk, status=JobStatus.RUNNING, attempts=attempt)
                .update(attempt_devices=max(int(devices), 1)))


def job_add_device_time(*, kind: JobKind, pk: int, attempt: int, seconds: float, device_kind: str,
                        devices: int) -> bool:
    """Add one run's device time (its wall time × the devices its worker child held) to the job,
    whatever became of the run: a failed or handed-back attempt held its devices too."""
    # attempt_started is cleared by the reaper once it counted a lost attempt's time: a worker that was only cut
    # off, reporting late, does not count it twice.
    return bool(kind.table.objects.filter(pk=pk, attempts=attempt, attempt_started__isnull=False).update(
        device_seconds=Coalesce(F("device_seconds"), 0.0) + seconds * devices, device_kind=device_kind))


def _lost_time(kind: JobKind, job) -> dict:
    """The fields that count a lost attempt's device time: from its start to its last heartbeat (the last sign its
    worker held the devices), on the devices its child held; its worker will never report it."""
    if job.attempt_started is None or job.heartbeat is None:
        return {}
    seconds = max((job.heartbeat - job.attempt_started).total_seconds(), 0.0) * max(job.attempt_devices, 1)
    return {"device_seconds": Coalesce(F("device_seconds"), 0.0) + seconds, "attempt_started": None,
            "device_kind": job.device_kind or kind.queue_of(job).removesuffix(JAX_SUFFIX)}


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
                lost_time = _lost_time(kind, job)
                if job.attempts - job.releases >= MAX_ATTEMPTS:
                    failed = still_lost.update(
                        status=JobStatus.FAILED, finished=now, **lost_time,
                        error=f"Lost {job.attempts} times: the worker {job.worker_host} stopped heartbeating. "
                              "Request it again to retry.")
                    counts["failed"] += failed
                    if failed and kind.on_lost:
                        kind.on_lost(job, False)
                elif still_lost.update(status=JobStatus.QUEUED, **lost_time):
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
