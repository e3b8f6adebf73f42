"""One run-trial task: claim under the study's lock (services/trial_claims.py), train outside any
transaction, finish and claim the next trial in the same step."""

import itertools
import logging
import os
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.selectors.training_inputs import study_for_training, trial_resume_artifacts
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path
from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.trial_claims import claim_offered_trial, claim_trial, finish_trial
from experiments.services.trial_epochs import StudyPruning, trial_heartbeat, trial_record_epoch
from experiments.services.trial_oracle import Claimant, Outcome
from workers.host.compute import keras_backend
from workers.host.heartbeat import Heartbeat
from workers.host.job_logs import job_log
from workers.host.memory import release_memory
from workers.host.shutdown import stop_requested
from workers.jobs.failures import failure_reason
from workers.training import checkpoints
from workers.training.configurations import run_environment, train_configuration, trial_spec
from workers.training.fitting import Resume
from workers.training.model_building import study_hyperparameters
from workers.trial_stops import TrialCancelled, TrialPreempted
from workers.tuners.oracle import KerasTunerOracles

log = logging.getLogger(__name__)
ORACLES = KerasTunerOracles()
SHUTDOWN_REASON = "Its worker shut down, so it stopped at an epoch end without penalty; it runs again."
PREEMPTED_REASON = ("Preempted at an epoch end so that a waiting study (of a team below its share of the queue, or of "
                    "a higher priority) could start; it resumes from that epoch without penalty.")


class _DatabaseReporter:
    def __init__(self, trial_pk: int, pruning: StudyPruning | None = None):
        self.trial_pk = trial_pk
        self.pruning = pruning
        self.known: dict = {}

    def model_built(self, model) -> None:
        """A Pareto pruner watches the model's size from the first epoch on (it is known before training)."""
        if self.pruning is not None and self.pruning.pareto:
            self.known = {"params": float(model.count_params())}

    def epoch_end(self, execution: int, epoch: int, logs: dict):
        verdict = with_db_retry(trial_record_epoch, trial_pk=self.trial_pk, execution=execution, epoch=epoch,
                                metrics=logs, pruning=self.pruning, known=self.known)
        if verdict and stop_requested():
            return False  # its worker is shutting down: stop here and hand the trial back
        return verdict


def _resume(study, trial, workdir: Path) -> Resume | None:
    """Where its preempted attempt stopped, with the weights it left; None for a fresh start (also when
    those weights are gone: the trial then trains from its first epoch)."""
    state = trial.resume or {}
    if not state.get("last_weights"):
        return None
    found = trial_resume_artifacts(study=study, ids=[state["last_weights"], state.get("best_weights"),
                                                     state.get("optimizer")])
    if state["last_weights"] not in found:
        log.warning("trial %s: the weights its preempted attempt left are gone; it starts over", trial.pk)
        return None
    last = artifact_copy_to_path(artifact=found[state["last_weights"]], path=workdir / f"resume-in{checkpoints.SUFFIX}")
    best = found.get(state.get("best_weights"))
    best = None if best is None else artifact_copy_to_path(artifact=best, path=workdir / f"best-in{checkpoints.SUFFIX}")
    optimizer = found.get(state.get("optimizer"))
    optimizer = None if optimizer is None else artifact_copy_to_path(
        artifact=optimizer, path=workdir / f"optimizer-in{checkpoints.SUFFIX}")
    return Resume(epoch=int(state["epoch"]), history=state["history"], best=state.get("best"),
                  wait=int(state.get("wait", 0)), last_weights=last, best_weights=best, optimizer=optimizer,
                  spent_seconds=float(state.get("spent_seconds", 0.0)))


def _keep_resume(study, trial, resume: Resume) -> dict:
    """The preempted attempt's state as Trial.resume, its weights stored as checkpoint artifacts."""
    def kept(path, name):
        return artifact_create_from_path(team=study.team, kind=ArtifactKind.CHECKPOINT, path=path,
                                         filename=f"study-{study.id}-trial-{trial.trial_id}-{name}{checkpoints.SUFFIX}").id

    return {"epoch": resume.epoch, "history": resume.history, "best": resume.best, "wait": resume.wait,
            "spent_seconds": resume.spent_seconds,
            "last_weights": kept(resume.last_weights, "resume"),
            "best_weights": None if resume.best_weights is None else kept(resume.best_weights, "resume-best"),
            "optimizer": None if resume.optimizer is None else kept(resume.optimizer, "resume-optimizer")}


def _train(study, trial) -> Outcome:
    hp = study_hyperparameters(study, trial.hyperparameters)
    spec = trial_spec(study, dict(hp.values), seed=study.seed + trial.number)
    with job_log(kind="trial", job_id=trial.pk, attempt=trial.attempt) as captured:
        return _train_logged(study, trial, hp, spec, captured)


def _train_logged(study, trial, hp, spec, captured) -> Outcome:
    import keras

    started = time.monotonic()
    heartbeat = Heartbeat(lambda: trial_heartbeat(trial_pk=trial.pk), settings.TRIAL_HEARTBEAT_SECONDS,
                          name=f"heartbeat-trial-{trial.pk}")
    heartbeat.start()
    environment: dict = {}
    try:
        environment = run_environment(study, spec)
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            try:
                result = train_configuration(study, hp, spec=spec, workdir=workdir,
                                             resume=_resume(study, trial, workdir),
                                             reporter=_DatabaseReporter(trial.pk, StudyPruning.for_study(study)))
            except TrialPreempted as stop:  # its weights go to storage before the folder goes
                return Outcome("released", error=PREEMPTED_REASON, resume=_keep_resume(study, trial, stop.resume))
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
    except Exception as exc:  # a crash: a readable FAILED trial, its traceback in the log; the study goes on
        if captured:
            captured.crashed(exc)
        return Outcome("failed", error=failure_reason(exc, job=f"trial {trial.pk}"), environment=environment)
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)


def _claimants(task_id: str, worker_name: str) -> Callable[[], Claimant]:
    host, claims = socket.gethostname(), itertools.count()

    def claimant() -> Claimant:
        return Claimant(tuner_id=f"{host}:{os.getpid()}:{task_id}:{next(claims)}", worker_host=host,
                        worker_name=worker_name)

    return claimant


def run_next_trial(*, study_id: int, task_id: str, run_claimed_job: Callable[[object], str],
                   worker_name: str = "") -> str:
    """Claim a trial of the study and train it; while trials are short, finish each one and
    claim the next under the same lock, for up to settings.CONTINUE_SECONDS, then hand the slot back
    to the broker (so other studies on the queue get their turn). When fair share gives the slot to a
    queued job instead, `run_claimed_job(row)` runs it (workers/jobs/slots.py)."""
    connections_close_expired()
    study = study_for_training(study_id=study_id)
    if study.backend != keras_backend():
        # Only a worker started around its queue check gets here: hand the wake-up, still
        # pending on the study, to the queue of the study's backend instead of failing a trial.
        log.warning("study %s trains with %s, this worker with %s: its wake-up goes to queue %s",
                    study_id, study.backend, keras_backend(), study.task_queue)
        trial_tasks_enqueue(study_id=study_id, queue=study.task_queue)
        return "misrouted"
    claimant = _claimants(task_id, worker_name)
    claim = with_db_retry(claim_trial, study_id=study_id, claimant=claimant(), oracles=ORACLES)
    if claim.status == "job":
        return run_claimed_job(claim.job)
    if claim.trial is not None and claim.trial.study_id != study_id:
        # Fair share gave this wake-up's slot to another study of the queue: train its trial.
        study = study_for_training(study_id=claim.trial.study_id)
    return _train_claimed(study, claim, claimant)


def run_offered_trial(*, study_id: int, kind, pk: int, task_id: str, worker_name: str = "") -> str | None:
    """A message for the job `pk` of `kind` offered its slot to this study, first in line: train the
    trial it gives (and the next ones, as run_next_trial does); None when it gives none."""
    connections_close_expired()
    claimant = _claimants(task_id, worker_name)
    claim = with_db_retry(claim_offered_trial, study_id=study_id, claimant=claimant(), oracles=ORACLES, kind=kind,
                          pk=pk)
    if claim.status != "running":
        return None
    return _train_claimed(study_for_training(study_id=study_id), claim, claimant)


def _train_claimed(study, claim, claimant: Callable[[], Claimant]) -> str:
    deadline = time.monotonic() + settings.CONTINUE_SECONDS
    status = claim.status
    while claim is not None and claim.status == "running":
        outcome = _train(study, claim.trial)
        status = outcome.status
        keep_going = (time.monotonic() < deadline and outcome.status in ("completed", "pruned")
                      and not stop_requested())
        claim = with_db_retry(finish_trial, trial_pk=claim.trial.pk, outcome=outcome, oracles=ORACLES,
                              study_id=study.id, next_claimant=claimant() if keep_going else None).claim
    return status
