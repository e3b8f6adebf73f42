"""One run-trial task, end to end: claim under the row lock, train outside any
transaction, finish under the lock, and wake the next trial."""

import itertools
import logging
import os
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from experiments.models import Artifact, Study, Trial
from experiments.services.artifacts import artifact_copy_to_path, artifact_create_from_path
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.recovery import studies_kick_quiet, study_touch
from experiments.services.trained_models import trained_models_requeue_lost
from experiments.services.trials import trial_heartbeat, trial_record_epoch, trial_stale
from workers import checkpoints, hypermodels
from workers.hyperparameters import to_hyperparameters
from workers.oracle import Claimant, Outcome, claim_trial, finish_trial
from workers.support import Heartbeat, load_dataset, release_memory, with_db_retry
from workers.training import TrialCancelled, TrialFailed, TrialSpec, run_trial

log = logging.getLogger(__name__)
IDLE_COUNTDOWN_SECONDS = 2.0
# A task keeps claiming the study's next trial itself for this long, then goes back to the queue.
CONTINUE_SECONDS = 60.0


class _DatabaseReporter:
    def __init__(self, trial_pk: int):
        self.trial_pk = trial_pk

    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool:
        return with_db_retry(trial_record_epoch, trial_pk=self.trial_pk, execution=execution, epoch=epoch,
                             metrics=logs)


def _warm_start(study: Study, values: dict, workdir: Path) -> Path | None:
    parent_id = values.get("tuner/trial_id")
    if not parent_id:
        return None
    parent = (
        Trial.objects.filter(study=study, trial_id=parent_id, status=Trial.Status.COMPLETED)
        .exclude(checkpoint=None).select_related("checkpoint").order_by("-number").first()
    )
    if parent is None:
        raise TrialFailed(f"Hyperband continues trial {parent_id}, but its checkpoint is missing.")
    return artifact_copy_to_path(artifact=parent.checkpoint, path=workdir / f"warm-start{checkpoints.SUFFIX}")


def _train(study: Study, trial: Trial) -> Outcome:
    import keras

    hp = to_hyperparameters(study.search_space)  # the study's space, as the oracle has it
    hp.values = dict(trial.hyperparameters)
    values = dict(hp.values)
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: trial_heartbeat(trial_pk=trial.pk), settings.TRIAL_HEARTBEAT_SECONDS,
                          name=f"heartbeat-trial-{trial.pk}")
    heartbeat.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            data, info = load_dataset(study.dataset)
            spec = TrialSpec(
                objective=study.objective_metric, direction=study.objective_direction,
                epochs=int(values.get("tuner/epochs", study.epochs)),
                initial_epoch=int(values.get("tuner/initial_epoch", 0)),
                batch_size=study.batch_size, patience=study.patience,
                executions=study.executions_per_trial, seed=study.seed + trial.number,
            )
            result = run_trial(
                build=lambda: hypermodels.build(study.hypermodel, hp, info), spec=spec, data=data,
                reporter=_DatabaseReporter(trial.pk), workdir=workdir,
                warm_start=_warm_start(study, values, workdir), fit=hypermodels.fit_function(study.hypermodel, hp),
            )
            checkpoint = artifact_create_from_path(
                team=study.team, kind=Artifact.Kind.CHECKPOINT, path=result.checkpoint_path,
                filename=f"study-{study.id}-trial-{trial.trial_id}{checkpoints.SUFFIX}",
            )
            return Outcome("completed", score=result.score, best_step=result.best_step, metrics=result.metrics,
                           checkpoint_id=checkpoint.id, duration_seconds=result.duration_seconds)
    except TrialCancelled:
        return Outcome("cancelled")
    except TrialFailed as exc:
        return Outcome("failed", error=str(exc))
    except hypermodels.UnknownHypermodel as exc:
        return Outcome("failed", error=str(exc))
    except MemoryError:
        return Outcome("failed", error="The trial ran out of memory; try fewer units or a smaller batch size.")
    except Exception as exc:  # any other crash becomes a readable FAILED trial; the study goes on
        log.exception("trial %s crashed", trial.pk)
        return Outcome("failed", error=f"{type(exc).__name__}: {exc}")
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)


def run_next_trial(*, study_id: int, task_id: str, worker_name: str = "") -> str:
    """Claim a trial of the study and train it; while trials are short, finish each one and
    claim the next under the same lock, for up to CONTINUE_SECONDS, then hand the slot back
    to the broker (so other studies on the queue get their turn)."""
    close_old_connections()
    host = socket.gethostname()
    claims = itertools.count()

    def claimant() -> Claimant:
        return Claimant(tuner_id=f"{host}:{os.getpid()}:{task_id}:{next(claims)}", worker_host=host,
                        worker_name=worker_name)

    claim = with_db_retry(claim_trial, study_id=study_id, claimant=claimant())
    study = Study.objects.select_related("dataset__arrays", "team").get(pk=study_id)
    deadline = time.monotonic() + CONTINUE_SECONDS
    status = claim.status
    while claim is not None and claim.status == "running":
        outcome = _train(study, claim.trial)
        status = outcome.status
        keep_going = time.monotonic() < deadline and outcome.status == "completed"
        finish = with_db_retry(finish_trial, trial_pk=claim.trial.pk, outcome=outcome, study_id=study_id,
                               next_claimant=claimant() if keep_going else None)
        claim = finish.claim
        if finish.wake:
            idle = claim is not None and claim.status == "idle"
            countdown = IDLE_COUNTDOWN_SECONDS if idle else None
            trial_tasks_enqueue(study_id=study_id, queue=study.queue, countdown=countdown)
    if status == "idle":
        # The oracle waits for running trials (Hyperband rounds, a grid's last cells): ask again soon.
        study_touch(study_id=study_id)
        trial_tasks_enqueue(study_id=study_id, queue=study.queue, countdown=IDLE_COUNTDOWN_SECONDS)
    return status


def reap_and_kick() -> dict:
    """The periodic job: RUNNING trials whose heartbeat went stale are LOST (their worker
    died); the oracle hears of it (so max_retries_per_trial applies) and a replacement is
    woken. Then quiet running studies get fresh wake-ups, and lost model trainings are
    queued again."""
    cutoff = timezone.now() - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    reaped = 0
    for trial_pk in trial_stale(older_than=cutoff):
        trial = Trial.objects.select_related("study").get(pk=trial_pk)
        outcome = Outcome("lost", error=f"Lost: the worker {trial.worker_name or trial.worker_host} stopped "
                          f"heartbeating for over {settings.TRIAL_STALE_SECONDS}s.")
        if finish_trial(trial_pk=trial_pk, outcome=outcome, stale_before=cutoff, study_id=trial.study_id).wake:
            trial_tasks_enqueue(study_id=trial.study_id, queue=trial.study.queue)
        reaped += 1
    return {"reaped": reaped, "kicked": studies_kick_quiet(),
            "models_requeued": trained_models_requeue_lost(stale_before=cutoff)}
