"""The one lifecycle every job kind but trials runs on a worker (claim, hand back when stopping,
heartbeat, work, fenced completion, failure with its reason, memory released), so the kinds'
modules hold only their work (a JobWork) and cannot drift apart again. The kinds: services/job_kinds.py's
JOB_KINDS; which work a task's message runs (fair share's pick): workers/jobs/slots.py."""

import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.jobs import (
    JobKind,
    job_add_device_time,
    job_claim_own,
    job_fail,
    job_heartbeat,
    job_hold_devices,
    job_release,
)
from workers.host.devices import child_devices
from workers.host.heartbeat import Heartbeat
from workers.host.job_logs import job_log
from workers.host.memory import release_memory
from workers.host.shutdown import stop_requested
from workers.host.versions import package_versions
from workers.jobs.failures import failure_reason
from workers.trial_stops import TrialCancelled

log = logging.getLogger(__name__)


@dataclass
class JobRun:
    """One claimed attempt, as the kind's work sees it. `environment`: what a failure records
    (None: nothing); the work may replace it once it knows more."""

    kind: JobKind
    row: object
    attempt: int
    started: float
    environment: dict | None = None
    devices: tuple[str, int] = ("cpu", 1)  # what its worker child holds: (kind, count)

    @property
    def pk(self) -> int:
        return self.row.pk

    def seconds(self) -> float:
        return time.monotonic() - self.started


def host_environment() -> dict:
    """Where a job that trains nothing ran: the host and the package versions."""
    return {"host": socket.gethostname(), "versions": package_versions()}


def _add_device_time(run: JobRun) -> None:
    try:
        device_kind, devices = run.devices
        with_db_retry(job_add_device_time, kind=run.kind, pk=run.pk, attempt=run.attempt, seconds=run.seconds(),
                      device_kind=device_kind, devices=devices)
    except Exception:  # a figure lost is no reason to fail the job
        log.warning("the device time of %s %s was not recorded", run.kind.label, run.pk, exc_info=True)


def _hold_devices(kind: JobKind, row, attempt: int) -> tuple[str, int]:
    """The devices this child holds for the job, written to its row (the quotas count its run so far
    on them) and recorded with its device time at the end: one figure for both."""
    held = ("cpu", 1)
    try:
        held = child_devices(queue=kind.queue_of(row))
        if held[1] != 1:  # the claim set one
            with_db_retry(job_hold_devices, kind=kind, pk=row.pk, attempt=attempt, devices=held[1])
    except Exception:  # a figure lost is no reason to fail the job
        log.warning("the devices of %s %s were not recorded", kind.label, row.pk, exc_info=True)
    return held


@dataclass(frozen=True)
class JobWork:
    """A kind's own part of a run: `work(run)` returns whether its completion was accepted (False:
    this attempt no longer owns the row, and the work removed what it made); `keras`: the work loads
    Keras, whose memory is released after it; `environment()`: what a failure records from the start."""

    work: Callable[[JobRun], bool]
    keras: bool = True
    environment: Callable[[], dict] | None = None

    def run(self, kind: JobKind, pk: int) -> str:
        return run_job(kind, pk, self.work, keras=self.keras, environment=self.environment)


def run_job(kind: JobKind, pk: int, work: Callable[[JobRun], bool], *, keras: bool = True,
            environment: Callable[[], dict] | None = None) -> str:
    """Claim the job `pk` of `kind` itself, whatever fair share would put first (a command or a test
    runs it here and now; a task's message goes through workers/jobs/slots.py), and run it."""
    connections_close_expired()
    row = with_db_retry(job_claim_own, kind=kind, pk=pk, worker_host=socket.gethostname())
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    return run_claimed(row, JobWork(work, keras, environment))


def run_claimed(row, job: JobWork) -> str:
    """Run the claimed job `row` (its kind in row.job_kind). The work raises TrialCancelled to stop
    (a fenced write refused, or the worker stopping at the next step or epoch end): a stopping worker
    hands the job back without a lost attempt. Any other exception fails the job with its reason."""
    kind, pk, attempt = row.job_kind, row.pk, row.attempts
    if stop_requested() and with_db_retry(job_release, kind=kind, pk=pk, attempt=attempt):
        return "released"  # claimed as its worker began to stop: another worker runs it
    devices = _hold_devices(kind, row, attempt)
    run = JobRun(kind=kind, row=row, attempt=attempt, started=time.monotonic(),
                 environment=job.environment() if job.environment else None, devices=devices)
    heartbeat = Heartbeat(lambda: job_heartbeat(kind=kind, pk=pk, attempt=attempt),
                          settings.TRIAL_HEARTBEAT_SECONDS, name=f"heartbeat-{kind.name}-{pk}")
    heartbeat.start()
    with job_log(kind=kind.name, job_id=pk, attempt=attempt) as captured:
        try:
            return "completed" if job.work(run) else "superseded"  # refused: requeued or cancelled while it worked
        except TrialCancelled:
            if stop_requested() and with_db_retry(job_release, kind=kind, pk=pk, attempt=attempt):
                return "released"  # its worker is shutting down: another one runs it
            return "superseded"  # this attempt no longer owns the row (requeued or cancelled)
        except Exception as exc:  # any crash becomes a readable FAILED job, its traceback in the log
            if captured:
                captured.crashed(exc)
            with_db_retry(job_fail, kind=kind, pk=pk, attempt=attempt, environment=run.environment,
                          error=failure_reason(exc, job=f"{kind.label} {pk}"))
            return "failed"
        finally:
            heartbeat.stop()
            _add_device_time(run)
            if job.keras:
                import keras as keras_module

                release_memory(keras_module, trial_seconds=run.seconds())
