"""One re-run task: a finished trial's configuration trained again exactly as the search trained
it (same seed, epochs, early stopping, executions, data split; a Hyperband trial continues
from the same parent checkpoint), outside the tuner. Nothing is exported: the result and
its curves are what a re-run is for."""

import socket
import tempfile
import time
from pathlib import Path

from django.conf import settings

from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.trial_reruns import (
    rerun_claim,
    rerun_complete,
    rerun_fail,
    rerun_heartbeat,
    rerun_record_epoch,
)
from workers.host.heartbeat import Heartbeat
from workers.host.memory import release_memory
from workers.jobs.failures import failure_reason
from workers.training.configurations import run_environment, train_configuration, trial_spec
from workers.training.model_building import study_hyperparameters
from workers.trial_stops import TrialCancelled


class _FencedReporter:
    def __init__(self, rerun_pk: int, attempt: int):
        self.rerun_pk, self.attempt = rerun_pk, attempt

    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool:
        return with_db_retry(rerun_record_epoch, rerun_pk=self.rerun_pk, attempt=self.attempt, execution=execution,
                             epoch=epoch, metrics=logs)


def rerun_trial(*, rerun_pk: int) -> str:
    import keras

    connections_close_expired()
    row = with_db_retry(rerun_claim, rerun_pk=rerun_pk, worker_host=socket.gethostname())
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    attempt, study = row.attempts, row.trial.study
    hp = study_hyperparameters(study, row.trial.hyperparameters)
    spec = trial_spec(study, dict(hp.values), seed=row.seed)
    environment: dict = {}
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: rerun_heartbeat(rerun_pk=rerun_pk, attempt=attempt),
                          settings.TRIAL_HEARTBEAT_SECONDS, name=f"heartbeat-rerun-{rerun_pk}")
    heartbeat.start()
    try:
        environment = run_environment(study, spec)
        with tempfile.TemporaryDirectory() as tmp:
            result = train_configuration(study, hp, spec=spec, reporter=_FencedReporter(rerun_pk, attempt),
                                         workdir=Path(tmp))
        done = with_db_retry(rerun_complete, rerun_pk=rerun_pk, attempt=attempt, score=result.score,
                             best_epoch=result.best_step + 1, metrics=result.metrics, compute=result.compute,
                             environment=environment, duration_seconds=result.duration_seconds)
        return "completed" if done else "superseded"
    except TrialCancelled:
        return "superseded"  # this attempt no longer owns the row (requeued by the reaper)
    except Exception as exc:  # any crash becomes a readable FAILED re-run
        with_db_retry(rerun_fail, rerun_pk=rerun_pk, attempt=attempt, environment=environment,
                      error=failure_reason(exc, job=f"re-run {rerun_pk}"))
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)
    return "failed"
