"""Celery tasks and worker signals: thin shims. Ids in, one runtime call, retry policy.
The runtime (and so TensorFlow) is imported inside task bodies and child-process hooks, so
importing this module, and the main worker process, stay light."""

from celery import shared_task
from celery.signals import (
    celeryd_after_setup,
    worker_process_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)

from experiments.services.connections import DATABASE_UNAVAILABLE
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.queueing import RUN_TRIAL_TASK

# Imported here, in the main process before the pool forks, so the children share its flag.
from workers.host.shutdown import request_stop, stop_at_epoch_end_on_sigterm, stop_requested


@celeryd_after_setup.connect
def _refuse_other_backends_queues(sender, instance, **_kwargs) -> None:
    """A worker serving another backend's queue would take jobs it cannot run as asked: it
    refuses to start, saying which queues to serve. (SystemExit, since Celery logs and ignores
    exceptions raised by signal handlers.)"""
    from workers.host.backends.selection import queue_errors, worker_backend

    queues = list(instance.app.amqp.queues.consume_from)
    errors = queue_errors(queues, worker_backend())
    if errors:
        raise SystemExit("Tuneboard worker not started: " + "; ".join(errors) + ".")


@worker_ready.connect
def _register_worker(sender, **_kwargs) -> None:
    from workers.host.fleet import on_worker_ready

    on_worker_ready(sender)


@worker_shutting_down.connect
def _stop_jobs_at_epoch_end(**_kwargs) -> None:
    request_stop()


@worker_shutdown.connect
def _unregister_worker(sender, **_kwargs) -> None:
    from workers.host.fleet import on_worker_shutdown

    on_worker_shutdown(sender.hostname)


@worker_process_init.connect
def _configure_child(**_kwargs) -> None:
    """Before TensorFlow loads in this child: pin it to its GPUs (TUNEBOARD_GPUS_PER_CHILD), bound its GPU memory
    when trials share them (TUNEBOARD_TRIALS_PER_GPU), split its CPU into logical devices for multi-replica CPU
    trials (TUNEBOARD_CPU_DEVICES), cap its threads."""
    from billiard.process import current_process

    from workers.host.backends.child import configure_child
    from workers.host.backends.selection import worker_backend
    from workers.host.packing import pin_packed_child

    configure_child(worker_backend(), packed=pin_packed_child(getattr(current_process(), "index", 0) or 0))
    import gc

    import workers.jobs.trials  # noqa: F401  load the backend, Keras and KerasTuner now, not in the first trial

    # The libraries' objects live as long as the process: keep them out of every later
    # garbage collection, which then takes milliseconds instead of a fifth of a second.
    gc.collect()
    gc.freeze()


# What every job's task shares: retried with back-off while the database is unreachable, for
# as long as it takes (the row in PostgreSQL is the job; the message only wakes a worker).
JOB_TASK = {"bind": True, "autoretry_for": DATABASE_UNAVAILABLE, "retry_backoff": 2, "retry_backoff_max": 60,
            "max_retries": None}


def _hand_over_if_stopping(task) -> None:
    """A message received as the worker began to stop goes back to the broker for another worker."""
    if stop_requested():
        raise task.retry(countdown=0, max_retries=None)


@shared_task(name=RUN_TRIAL_TASK, **JOB_TASK)
def run_trial(self, study_id: int) -> str:
    _hand_over_if_stopping(self)
    from workers.jobs.slots import run_wakeup

    with stop_at_epoch_end_on_sigterm():
        return run_wakeup(study_id=study_id, task_id=self.request.id or "eager",
                          worker_name=self.request.hostname or "")


def _run_job(task, kind_name: str, pk: int) -> str:
    """What every job kind's task does: hand a message back if the worker is stopping, else run the
    work fair share puts first (workers/jobs/slots.py), stopping at its next step or epoch end on SIGTERM."""
    _hand_over_if_stopping(task)
    from workers.jobs.slots import run_job_message

    with stop_at_epoch_end_on_sigterm():
        return run_job_message(kind_name=kind_name, pk=pk, task_id=task.request.id or "eager",
                               worker_name=task.request.hostname or "")


# One task per job kind, named by its row of JOB_KINDS (the only place the names are written).
@shared_task(name=JOB_KINDS["models"].task, **JOB_TASK)
def make_trained_model(self, model_pk: int) -> str:
    return _run_job(self, "models", model_pk)


@shared_task(name=JOB_KINDS["reruns"].task, **JOB_TASK)
def rerun_trial(self, rerun_pk: int) -> str:
    return _run_job(self, "reruns", rerun_pk)


@shared_task(name=JOB_KINDS["conversions"].task, **JOB_TASK)
def convert_model(self, conversion_pk: int) -> str:
    return _run_job(self, "conversions", conversion_pk)


@shared_task(name=JOB_KINDS["serving_exports"].task, **JOB_TASK)
def export_serving(self, export_pk: int) -> str:
    return _run_job(self, "serving_exports", export_pk)


@shared_task(name=JOB_KINDS["variants"].task, **JOB_TASK)
def quantize_model(self, variant_pk: int) -> str:
    return _run_job(self, "variants", variant_pk)


@shared_task(name=JOB_KINDS["predictions"].task, **JOB_TASK)
def predict_batch(self, prediction_pk: int) -> str:
    return _run_job(self, "predictions", prediction_pk)


@shared_task(name="workers.tasks.reap", ignore_result=True)
def reap() -> dict:
    from workers.host.reaper import reap as run

    return run()


@shared_task(name="workers.tasks.purge_audit", ignore_result=True)
def purge_audit() -> int:
    from experiments.services.audit import audit_purge

    return audit_purge()


@shared_task(
    name="workers.tasks.deliver_notification",
    autoretry_for=DATABASE_UNAVAILABLE,
    retry_backoff=2,
    retry_backoff_max=60,
    max_retries=None,
)
def deliver_notification(delivery_pk: int) -> str:
    # The backoff between tries lives in the delivery row, not in Celery's retry.
    from experiments.services.notification_delivery import delivery_attempt

    return delivery_attempt(delivery_pk=delivery_pk)


@shared_task(name="workers.tasks.purge_job_logs", ignore_result=True)
def purge_job_logs() -> int:
    from experiments.services.job_logs import job_logs_purge

    return job_logs_purge()
