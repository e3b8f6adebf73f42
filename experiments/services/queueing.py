"""Wake-ups for workers. The broker only carries ids; the database decides what runs."""

import logging

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)
RUN_TRIAL_TASK = "workers.tasks.run_trial"
TRAIN_MODEL_TASK = "workers.tasks.train_model"
RERUN_TRIAL_TASK = "workers.tasks.rerun_trial"


def _send_on_commit(task: str, *, args: list, queue: str, count: int = 1, countdown: float | None = None) -> None:
    """Send once the current transaction commits (never before the rows the task needs are
    visible to the worker)."""

    def send() -> None:
        try:
            for _ in range(count):
                current_app.send_task(task, args=args, queue=queue, countdown=countdown)
        except Exception:
            # The broker is down. The row says what should run and when it was sent, so the
            # reaper re-sends it (trial_runs.studies_refill, model_runs.models_reap).
            log.warning("could not send %s%s; the reaper re-sends it", task, args, exc_info=True)

    transaction.on_commit(send)


def trial_tasks_enqueue(*, study_id: int, queue: str, count: int = 1, countdown: float | None = None) -> None:
    _send_on_commit(RUN_TRIAL_TASK, args=[study_id], queue=queue, count=count, countdown=countdown)


def model_task_enqueue(*, model_pk: int, queue: str) -> None:
    _send_on_commit(TRAIN_MODEL_TASK, args=[model_pk], queue=queue)


def rerun_task_enqueue(*, rerun_pk: int, queue: str) -> None:
    _send_on_commit(RERUN_TRIAL_TASK, args=[rerun_pk], queue=queue)
