"""Writing what a running trial or job printed and what it used of its host (its worker, every few
seconds from a thread), and forgetting old logs with their samples. Reading them: experiments/selectors/job_logs.py."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from experiments.models import JobLog, JobSample


@dataclass(frozen=True)
class LogSnapshot:
    """The worker's bounded copy of one run's output at a moment."""

    head: str
    tail: str
    lines: int
    cut_lines: int
    cut_bytes: int


def job_log_open(*, kind: str, job_id: int, attempt: int, worker: str = "") -> int:
    """A new log for one run of the job on `worker` (its Celery node name); its id is what the writes name."""
    return JobLog.objects.create(kind=kind, job_id=job_id, attempt=attempt, worker=worker).pk


def job_log_write(*, log_id: int, snapshot: LogSnapshot, running: bool = True) -> None:
    """Replace the stored copy with the worker's newer one (head and tail are bounded, so a write is too)."""
    JobLog.objects.filter(pk=log_id).update(
        head=snapshot.head, tail=snapshot.tail, lines=snapshot.lines, cut_lines=snapshot.cut_lines,
        cut_bytes=snapshot.cut_bytes, running=running, updated=timezone.now())


def job_samples_add(*, log_id: int, samples: list[tuple]) -> None:
    """The worker's system samples of one run since its last write: (time, values) pairs. The log
    counts as written to: a quiet run that samples is alive (the Workers page and the purge read it)."""
    JobSample.objects.bulk_create([JobSample(log_id=log_id, at=at, values=values) for at, values in samples])
    JobLog.objects.filter(pk=log_id).update(updated=timezone.now())


def job_logs_purge(*, now=None) -> int:
    """Forget logs not written to for TUNEBOARD_JOB_LOG_DAYS (beat runs it hourly)."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.JOB_LOG_DAYS)
    deleted, _ = JobLog.objects.filter(updated__lt=cutoff).delete()
    return deleted
