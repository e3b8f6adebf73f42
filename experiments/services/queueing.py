"""Wake-ups for workers. The broker only carries study ids; the database decides what runs."""

from celery import current_app
from django.db import transaction

RUN_TRIAL_TASK = "workers.tasks.run_trial"


def trial_tasks_enqueue(*, study_id: int, queue: str, count: int = 1, countdown: float | None = None) -> None:
    """Send `count` run-trial tasks once the current transaction commits (never before the
    rows they need are visible to the worker)."""

    def send() -> None:
        for _ in range(count):
            current_app.send_task(RUN_TRIAL_TASK, args=[study_id], queue=queue, countdown=countdown)

    transaction.on_commit(send)
