"""Wake-ups for workers. The broker only carries ids; the database decides what runs. A job's
task name is its JobKind's (services/job_kinds.py), so a kind's name is written once."""

import logging
from collections.abc import Callable

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)
RUN_TRIAL_TASK = "workers.tasks.run_trial"


def _send_on_commit(task: str, *, args: list, queue: str, count: int = 1, countdown: float | None = None,
                    unsent: Callable[[int], None] | None = None) -> None:
    """Send once the current transaction commits (never before the rows the task needs are
    visible to the worker). `unsent(n)` hears of the n messages the broker did not take, so
    the row stops counting them as sent."""

    def send() -> None:
        sent = 0
        try:
            for _ in range(count):
                current_app.send_task(task, args=args, queue=queue, countdown=countdown)
                sent += 1
        except Exception:
            # The broker is down. The row says what should run, and `unsent` marks it as not
            # sent, so the reaper's next pass re-sends it (trial_reaper.studies_refill,
            # jobs.jobs_reap) without the backoff meant for messages nobody picks up.
            log.warning("could not send %s%s; the reaper re-sends it", task, args, exc_info=True)
            if unsent is not None:
                try:
                    unsent(count - sent)
                except Exception:
                    log.warning("could not mark %s%s unsent", task, args, exc_info=True)

    transaction.on_commit(send)


def trial_tasks_enqueue(*, study_id: int, queue: str, count: int = 1, countdown: float | None = None,
                        unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(RUN_TRIAL_TASK, args=[study_id], queue=queue, count=count, countdown=countdown, unsent=unsent)


def job_task_enqueue(*, kind, pk: int, queue: str, countdown: float | None = None,
                     unsent: Callable[[int], None] | None = None) -> None:
    """Wake a worker of `queue` for the job `pk` of `kind` (a services.job_kinds.JobKind)."""
    _send_on_commit(kind.task, args=[pk], queue=queue, countdown=countdown, unsent=unsent)
