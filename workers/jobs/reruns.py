"""One re-run task: a finished trial's configuration trained again exactly as the search trained
it (same seed, epochs, early stopping, executions, data split; a Hyperband trial continues
from the same parent checkpoint), outside the tuner. Nothing is exported: the result and
its curves are what a re-run is for."""

import tempfile
from pathlib import Path

from experiments.services.connections import with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.trial_reruns import rerun_complete, rerun_record_epoch
from workers.host.shutdown import stop_requested
from workers.jobs.runner import JobRun, JobWork
from workers.training.configurations import run_environment, train_configuration, trial_spec
from workers.training.model_building import study_hyperparameters


class _FencedReporter:
    def __init__(self, rerun_pk: int, attempt: int):
        self.rerun_pk, self.attempt = rerun_pk, attempt

    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool:
        owned = with_db_retry(rerun_record_epoch, rerun_pk=self.rerun_pk, attempt=self.attempt, execution=execution,
                              epoch=epoch, metrics=logs)
        return owned and not stop_requested()  # its worker is shutting down: stop here and hand it back


def _work(run: JobRun) -> bool:
    row = run.row
    study = row.trial.study
    hp = study_hyperparameters(study, row.trial.hyperparameters)
    spec = trial_spec(study, dict(hp.values), seed=row.seed)
    run.environment = run_environment(study, spec)
    with tempfile.TemporaryDirectory() as tmp:
        result = train_configuration(study, hp, spec=spec, reporter=_FencedReporter(run.pk, run.attempt),
                                     workdir=Path(tmp))
    return with_db_retry(rerun_complete, rerun_pk=run.pk, attempt=run.attempt, score=result.score,
                         best_epoch=result.best_step + 1, metrics=result.metrics, compute=result.compute,
                         environment=run.environment, duration_seconds=result.duration_seconds)


WORK = JobWork(_work, environment=dict)  # {} until the run's is known


def rerun_trial(*, rerun_pk: int) -> str:
    return WORK.run(JOB_KINDS["reruns"], rerun_pk)
