"""Celery tasks: thin shims. Ids in, one runtime call, retry policy. The runtime (and so
TensorFlow) is imported inside task bodies so that importing this module stays light."""

from celery import shared_task
from celery.signals import worker_process_init
from django.db import InterfaceError, OperationalError


@worker_process_init.connect
def _configure_child(**_kwargs) -> None:
    from workers.devices import configure_threads

    configure_threads()


@shared_task(
    name="workers.tasks.run_trial",
    bind=True,
    autoretry_for=(OperationalError, InterfaceError),
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=None,
)
def run_trial(self, study_id: int) -> str:
    from workers.runner import run_next_trial

    return run_next_trial(study_id=study_id, task_id=self.request.id or "eager")
