"""Wake-ups for workers. The broker only carries study ids; the database decides what runs."""

import logging

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)
RUN_TRIAL_TASK = "workers.tasks.run_trial"


def trial_tasks_enqueue(*, study_id: int, queue: str, count: int = 1, countdown: float | None = None) -> None:
    """Send `count` run-trial tasks once the current transaction commits (never before the
    rows they need are visible to the worker)."""

    def send() -> None:
        try:
            for _ in range(count):
                current_app.send_task(RUN_TRIAL_TASK, args=[study_id], queue=queue, countdown=countdown)
        except Exception:
            # The broker is down: the reaper re-sends wake-ups to quiet studies once it is back.
            log.warning("could not enqueue a trial of study %s; the reaper will retry", study_id, exc_info=True)

    transaction.on_commit(send)
