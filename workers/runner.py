"""One run-trial task, end to end: claim (trial_runs, under the study's lock), train outside
any transaction, finish (under the lock again, claiming the next trial in the same step)."""

import itertools
import logging
import os
import socket
import tempfile
import time
from pathlib import Path

from django.conf import settings

from experiments.services.artifacts import ArtifactKind, artifact_copy_to_path, artifact_create_from_path
from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.training_inputs import study_for_training, trial_checkpoint_continued
from experiments.services.trial_epochs import StudyPruning, trial_heartbeat, trial_record_epoch
from experiments.services.trial_runs import Claimant, Outcome, claim_trial, finish_trial
from experiments.tuning.compute_options import ComputeSettings
from experiments.tuning.objectives import needs_latency
from workers import checkpoints, hypermodels
from workers.host.compute import keras_backend
from workers.host.environment import environment_record, training_settings
from workers.host.heartbeat import Heartbeat
from workers.host.memory import release_memory
from workers.host.shutdown import stop_requested
from workers.model_building import build_model, study_hyperparameters
from workers.oracle import KerasTunerOracles
from workers.support import failure_reason, load_dataset
from workers.training import TrialResult, TrialSpec, describe, run_trial
from workers.trial_stops import TrialCancelled, TrialFailed

log = logging.getLogger(__name__)
ORACLES = KerasTunerOracles()
SHUTDOWN_REASON = "Its worker shut down, so it stopped at an epoch end without penalty; it runs again."


class _DatabaseReporter:
    def __init__(self, trial_pk: int, pruning: StudyPruning | None = None):
        self.trial_pk = trial_pk
        self.pruning = pruning

    def epoch_end(self, execution: int, epoch: int, logs: dict):
        verdict = with_db_retry(trial_record_epoch, trial_pk=self.trial_pk, execution=execution, epoch=epoch,
                                metrics=logs, pruning=self.pruning)
        if verdict and stop_requested():
            return False  # its worker is shutting down: stop here and hand the trial back
        return verdict


def _warm_start(study, values: dict, workdir: Path) -> Path | None:
    parent_id = values.get("tuner/trial_id")
    if not parent_id:
        return None
    checkpoint = trial_checkpoint_continued(study=study, trial_id=parent_id)
    if checkpoint is None:
        raise TrialFailed(f"Hyperband continues trial {parent_id}, but its checkpoint is missing.")
    return artifact_copy_to_path(artifact=checkpoint, path=workdir / f"warm-start{checkpoints.SUFFIX}")


def trial_spec(study, values: dict, *, seed: int) -> TrialSpec:
    """How a configuration of the study trains: epochs (Hyperband's own, when it set them),
    early stopping, batch size, executions and the seed."""
    return TrialSpec(
        objective=study.objective_metric, direction=study.objective_direction,
        epochs=int(values.get("tuner/epochs", study.epochs)), initial_epoch=int(values.get("tuner/initial_epoch", 0)),
        batch_size=study.batch_size, patience=study.patience, executions=study.executions_per_trial, seed=seed,
        time_limit_seconds=settings.MAX_TRIAL_SECONDS, measure_latency=needs_latency(study),
    )


def run_environment(study, spec: TrialSpec) -> dict:
    """The environment record of a run of the study's configuration in this child."""
    try:
        compute = describe(ComputeSettings.from_study(study), study.batch_size)
    except TrialFailed:
        compute = None  # no such device here: the run fails with the reason, the rest still holds
    return environment_record(dataset=study.dataset, seed=spec.seed, hypermodel=study.hypermodel, compute=compute,
                              training=training_settings(spec))


def train_configuration(study, hp, *, spec: TrialSpec, reporter, workdir: Path) -> TrialResult:
    """One configuration trained as the search trains it: the trial and its re-runs alike."""
    data, info = load_dataset(study.dataset)
    return run_trial(
        build=lambda: build_model(study, hp, info), spec=spec, data=data, reporter=reporter, workdir=workdir,
        warm_start=_warm_start(study, dict(hp.values), workdir), fit=hypermodels.fit_function(study.hypermodel, hp),
        compute=ComputeSettings.from_study(study),
    )


def _train(study, trial) -> Outcome:
    import keras

    hp = study_hyperparameters(study, trial.hyperparameters)
    spec = trial_spec(study, dict(hp.values), seed=study.seed + trial.number)
    environment: dict = {}
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: trial_heartbeat(trial_pk=trial.pk), settings.TRIAL_HEARTBEAT_SECONDS,
                          name=f"heartbeat-trial-{trial.pk}")
    heartbeat.start()
    try:
        environment = run_environment(study, spec)
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            result = train_configuration(study, hp, spec=spec, workdir=workdir,
                                         reporter=_DatabaseReporter(trial.pk, StudyPruning.for_study(study)))
            checkpoint = artifact_create_from_path(
                team=study.team, kind=ArtifactKind.CHECKPOINT, path=result.checkpoint_path,
                filename=f"study-{study.id}-trial-{trial.trial_id}{checkpoints.SUFFIX}",
            )
            return Outcome("pruned" if result.pruned else "completed", score=result.score,
                           best_step=result.best_step, metrics=result.metrics, checkpoint_id=checkpoint.id,
                           duration_seconds=result.duration_seconds, compute=result.compute,
                           epochs_trained=result.epochs_trained, pruning=result.pruned or {},
                           environment=environment)
    except TrialCancelled:
        if stop_requested():
            return Outcome("released", error=SHUTDOWN_REASON)
        return Outcome("released")
    except Exception as exc:  # any crash becomes a readable FAILED trial; the study goes on
        return Outcome("failed", error=failure_reason(exc, job=f"trial {trial.pk}"), environment=environment)
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)


def run_next_trial(*, study_id: int, task_id: str, worker_name: str = "") -> str:
    """Claim a trial of the study and train it; while trials are short, finish each one and
    claim the next under the same lock, for up to settings.CONTINUE_SECONDS, then hand the slot back
    to the broker (so other studies on the queue get their turn)."""
    connections_close_expired()
    host = socket.gethostname()
    claims = itertools.count()
    study = study_for_training(study_id=study_id)
    if study.backend != keras_backend():
        # Only a worker started around its queue check gets here: hand the wake-up, still
        # pending on the study, to the queue of the study's backend instead of failing a trial.
        log.warning("study %s trains with %s, this worker with %s: its wake-up goes to queue %s",
                    study_id, study.backend, keras_backend(), study.task_queue)
        trial_tasks_enqueue(study_id=study_id, queue=study.task_queue)
        return "misrouted"

    def claimant() -> Claimant:
        return Claimant(tuner_id=f"{host}:{os.getpid()}:{task_id}:{next(claims)}", worker_host=host,
                        worker_name=worker_name)

    claim = with_db_retry(claim_trial, study_id=study_id, claimant=claimant(), oracles=ORACLES)
    deadline = time.monotonic() + settings.CONTINUE_SECONDS
    status = claim.status
    while claim is not None and claim.status == "running":
        outcome = _train(study, claim.trial)
        status = outcome.status
        keep_going = (time.monotonic() < deadline and outcome.status in ("completed", "pruned")
                      and not stop_requested())
        claim = with_db_retry(finish_trial, trial_pk=claim.trial.pk, outcome=outcome, oracles=ORACLES,
                              study_id=study_id, next_claimant=claimant() if keep_going else None).claim
    return status
