"""Wake-ups for workers. The broker only carries ids; the database decides what runs."""

import logging
from collections.abc import Callable

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)
RUN_TRIAL_TASK = "workers.tasks.run_trial"
TRAIN_MODEL_TASK = "workers.tasks.train_model"
RERUN_TRIAL_TASK = "workers.tasks.rerun_trial"
CONVERT_MODEL_TASK = "workers.tasks.convert_model"
EXPORT_SERVING_TASK = "workers.tasks.export_serving"
PREDICT_TASK = "workers.tasks.predict_batch"


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
            # sent, so the reaper's next pass re-sends it (trial_runs.studies_refill,
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


def model_task_enqueue(*, model_pk: int, queue: str, unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(TRAIN_MODEL_TASK, args=[model_pk], queue=queue, unsent=unsent)


def rerun_task_enqueue(*, rerun_pk: int, queue: str, unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(RERUN_TRIAL_TASK, args=[rerun_pk], queue=queue, unsent=unsent)


def conversion_task_enqueue(*, conversion_pk: int, queue: str, unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(CONVERT_MODEL_TASK, args=[conversion_pk], queue=queue, unsent=unsent)


def serving_export_task_enqueue(*, export_pk: int, queue: str, unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(EXPORT_SERVING_TASK, args=[export_pk], queue=queue, unsent=unsent)


def prediction_task_enqueue(*, prediction_pk: int, queue: str, unsent: Callable[[int], None] | None = None) -> None:
    _send_on_commit(PREDICT_TASK, args=[prediction_pk], queue=queue, unsent=unsent)
