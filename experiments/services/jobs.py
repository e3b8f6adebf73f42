"""The job lifecycle: the moves every job a worker claims besides trials shares — trained models
(retrains, promotions, ensembles; services/model_runs.py), trial re-runs
(services/trial_reruns.py) and conversions (services/conversions.py), all rows of an
`experiments.models.jobs.Job` table.

A request saves one QUEUED row and sends its task once the transaction commits. A worker claims
the row with a conditional update (a duplicated delivery finds nothing to claim); each claim is
a new attempt, and every later write of that worker names its attempt (the fence): once the
reaper has queued the job again, or a user cancelled it, the old worker's writes are refused
and it stops. States and their moves: `experiments/states.py`.

The reaper re-sends QUEUED jobs whose task never reached a worker (a Redis restart, the broker
down at request time), with a back-off while nobody picks them up, and queues RUNNING jobs whose
worker stopped heartbeating again, once, before failing them with the reason. Every function
takes the job's table (`table`, a Job subclass) or a queryset of it; what differs per kind of
job (its queue, what a claim loads, whom a loss is told) is passed in by its own module."""

import logging
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from experiments.states import JOB_MOVES, JobStatus, sources

log = logging.getLogger(__name__)
# A job whose worker died is queued again this many times before it is FAILED.
MAX_ATTEMPTS = 2
# The wait before a re-send doubles with each unanswered one, up to 2**this times.
MAX_RESEND_DOUBLINGS = 5


def resend_due(last_sent, resends: int, now) -> bool:
    """True when a message sent at `last_sent` and still not picked up counts as lost. The wait
    doubles with each unanswered resend (capped), so a queue nobody serves does not fill up.
    Used for job tasks, study wake-ups and webhook deliveries alike."""
    wait = settings.RESEND_AFTER_SECONDS * 2 ** min(resends, MAX_RESEND_DOUBLINGS)
    return last_sent is None or last_sent < now - timedelta(seconds=wait)


def job_sent(*, table, pk: int) -> None:
    """Note when the job's task was sent (the reaper re-sends it if nobody claims it)."""
    table.objects.filter(pk=pk).update(last_sent=timezone.now())


def job_unsent(table, pk: int):
    """What a send the broker refused undoes: the job counts as never sent (the reaper's next
    pass sends it) and the attempt is not a resend that went unanswered (no backoff)."""

    def unsent(_count: int) -> None:
        table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
            last_sent=None, resends=Greatest(F("resends") - 1, 0))

    return unsent


def job_move(*, table, pk: int, target: str, attempt: int | None = None, **fields) -> bool:
    """One conditional UPDATE from any state that may reach `target` (and, with `attempt`,
    only while that attempt still owns the row)."""
    rows = table.objects.filter(pk=pk, status__in=sources(JOB_MOVES, target))
    if attempt is not None:
        rows = rows.filter(status=JobStatus.RUNNING, attempts=attempt)
    return bool(rows.update(status=target, **fields))


def job_claim(*, table, pk: int, worker_host: str) -> bool:
    """QUEUED -> RUNNING for exactly one worker, as a new attempt."""
    now = timezone.now()
    return bool(table.objects.filter(pk=pk, status=JobStatus.QUEUED).update(
        status=JobStatus.RUNNING, attempts=F("attempts") + 1, worker_host=worker_host, heartbeat=now,
        started=Coalesce(F("started"), now), error="", resends=0,
    ))


def job_heartbeat(*, table, pk: int, attempt: int) -> bool:
    """False when this attempt no longer owns the job: its worker stops."""
    return bool(table.objects.filter(pk=pk, status=JobStatus.RUNNING, attempts=attempt)
                .update(heartbeat=timezone.now()))


def job_record_epoch(*, table, pk: int, attempt: int, row, unique_fields: list[str]) -> bool:
    """Store `row` (an epoch of the job, unsaved; a re-reported epoch replaces the earlier one,
    `unique_fields` say which) and bump the heartbeat; False when this attempt no longer owns
    the job (stop)."""
    with transaction.atomic():
        if not job_heartbeat(table=table, pk=pk, attempt=attempt):
            return False
        type(row).objects.bulk_create([row], update_conflicts=True, unique_fields=unique_fields,
                                      update_fields=["metrics"])
    return True


def job_fail(*, table, pk: int, attempt: int, error: str, **fields) -> bool:
    return job_move(table=table, pk=pk, target=JobStatus.FAILED, attempt=attempt, error=error,
                    finished=timezone.now(), **fields)


def job_release(*, table, pk: int, attempt: int, send: Callable) -> bool:
    """Its worker is shutting down: the job goes back to the queue at once, without counting
    as a lost attempt (the next claim is still a new attempt, so this one's writes are fenced);
    `send(pk)` sends its task again."""
    with transaction.atomic():
        released = job_move(table=table, pk=pk, target=JobStatus.QUEUED, attempt=attempt,
                            releases=F("releases") + 1, error="", worker_host="")
        if released:
            send(pk)
    return released


def job_cancel(*, table, pk: int) -> bool:
    """A user stops a queued or running job; a running worker stops at its next fenced write."""
    return job_move(table=table, pk=pk, target=JobStatus.CANCELLED, error="Cancelled by a user.",
                    finished=timezone.now())


def jobs_reap(*, jobs, send: Callable, on_lost: Callable | None = None, now=None) -> dict:
    """Lost RUNNING jobs are queued again (or failed after MAX_ATTEMPTS); QUEUED jobs whose task
    was sent long ago and never claimed are sent again. Each row on its own. `jobs` is the
    table's queryset (with what `send(row)` and `on_lost(row, requeued)` read)."""
    now = now or timezone.now()
    table = jobs.model
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
                    if failed and on_lost:
                        on_lost(job, False)
                elif still_lost.update(status=JobStatus.QUEUED):
                    send(job)
                    if on_lost:
                        on_lost(job, True)
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
                    send(job)
                    counts["resent"] += 1
        except Exception:
            log.exception("the reaper could not re-send %s %s; it tries again next time", table.__name__, job.pk)
    return counts
