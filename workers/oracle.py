"""KerasTuner oracles whose state lives in PostgreSQL, touched only under the Study row lock.

Claim and finish each rebuild the study's oracle inside one transaction that holds
`SELECT ... FOR UPDATE` on the Study row: a fresh oracle of the study's class, its trials
from the Trial rows, `set_state(study.oracle_state)`; then one oracle call; then the new
state is written back. The row lock, not the oracle's per-process lock, is what
serialises claims across worker processes and hosts.
"""

import collections
import copy
from dataclasses import dataclass, field

import keras_tuner as kt
from django.db import transaction
from django.utils import timezone
from keras_tuner.src.engine import metrics_tracking
from keras_tuner.src.engine.trial import Trial as KtTrial
from keras_tuner.src.engine.trial import TrialStatus
from keras_tuner.src.tuners.gridsearch import LinkedList

from experiments.models import Study, Trial
from experiments.services import trials as trial_services
from workers.hyperparameters import to_hyperparameters


class _StateInPostgres:
    """KerasTuner oracles save their state and every trial to JSON files on each call;
    ours live in PostgreSQL (written by this module), so those writes are skipped."""

    def save(self):
        pass

    def _save_trial(self, trial):
        pass


class RandomSearchOracle(_StateInPostgres, kt.oracles.RandomSearchOracle):
    pass


class BayesianOptimizationOracle(_StateInPostgres, kt.oracles.BayesianOptimizationOracle):
    pass


class HyperbandOracle(_StateInPostgres, kt.oracles.HyperbandOracle):
    pass


class ResumableGridSearchOracle(_StateInPostgres, kt.oracles.GridSearchOracle):
    """GridSearchOracle keeps its place in the grid outside get_state(); a rebuilt one
    would answer STOPPED after the first trial. Carry the grid position in the state."""

    def get_state(self):
        state = super().get_state()
        ids = self._ordered_ids
        state["grid"] = {
            "memory": list(ids._memory),
            "next_index": [[k, v] for k, v in ids._next_index.items()],
            "last_index": ids._last_index,
            "populate_next": list(self._populate_next),
        }
        return state

    def set_state(self, state):
        super().set_state(state)
        grid = state.get("grid")
        ids = LinkedList()
        if grid:
            ids._memory = list(grid["memory"])
            ids._data_to_index = {data: i for i, data in enumerate(ids._memory)}
            ids._next_index = collections.defaultdict(lambda: None, {k: v for k, v in grid["next_index"]})
            ids._last_index = grid["last_index"]
            self._populate_next = list(grid["populate_next"])
        self._ordered_ids = ids


def _new_oracle(study: Study):
    common = dict(
        objective=kt.Objective(study.objective_metric, direction=study.objective_direction),
        hyperparameters=to_hyperparameters(study.search_space),
        # Hyperparameters a hypermodel asks for but the study did not list keep their defaults.
        tune_new_entries=False,
        allow_new_entries=True,
        seed=study.seed,
        max_retries_per_trial=study.max_retries_per_trial,
        max_consecutive_failed_trials=study.max_consecutive_failed_trials,
    )
    if study.tuner == Study.Tuner.HYPERBAND:
        # Hyperband sizes itself from its brackets; the study's max_trials caps it (load_oracle).
        oracle = HyperbandOracle(max_epochs=study.epochs, factor=3, **common)
    elif study.tuner == Study.Tuner.BAYESIAN:
        oracle = BayesianOptimizationOracle(max_trials=study.max_trials, **common)
    elif study.tuner == Study.Tuner.GRID:
        oracle = ResumableGridSearchOracle(max_trials=study.max_trials, **common)
    else:
        oracle = RandomSearchOracle(max_trials=study.max_trials, **common)
    oracle.verbose = 0
    return oracle


def compact_trial_state(kt_trial) -> dict:
    """A kt trial's state without its copy of the search space: every trial of a study
    shares the study's space, and its values are the Trial row's `hyperparameters`.
    Rebuilding a thousand full states costs seconds; this costs milliseconds."""
    state = kt_trial.get_state()
    state.pop("hyperparameters")
    return state


def _trial_from_row(space, values: dict, state: dict) -> KtTrial:
    hp = copy.copy(space)  # shares the (read-only) space; values and scopes are its own
    hp.values = dict(values)
    hp._conditions = []
    hp._name_scopes = []
    trial = KtTrial(hyperparameters=hp, trial_id=state["trial_id"], status=state["status"])
    trial.metrics = metrics_tracking.MetricsTracker.from_config(state["metrics"])
    trial.score = state["score"]
    trial.best_step = state["best_step"]
    trial.message = state["message"]
    return trial


# One rebuilt oracle per study per process, reused while nobody else wrote the study's
# oracle state (its version is read under the row lock). A single busy worker then
# never rebuilds; after another worker's write it rebuilds once.
_cache: dict[int, tuple[int, object, object]] = {}


def load_oracle(study: Study):
    cached = _cache.pop(study.id, None)
    if cached is not None and cached[0] <= study.oracle_version:
        version, oracle, space = cached
    else:
        version, oracle = 0, _new_oracle(study)
        space = oracle.hyperparameters
        oracle.trials = {}
    if version < study.oracle_version:
        # Only the trials written since our version; later attempts of a retried trial win.
        rows = (Trial.objects.filter(study=study, oracle_version__gt=version).order_by("number")
                .values_list("hyperparameters", "kt_state"))
        for values, state in rows:
            oracle.trials[state["trial_id"]] = _trial_from_row(space, values, state)
        if study.oracle_state:
            oracle.set_state(study.oracle_state)
    oracle.max_trials = study.max_trials  # editable while the study runs
    oracle._tuneboard_space = space
    return oracle


def _remember(study: Study, oracle) -> None:
    """Keep the oracle for the next claim once the transaction that saved it commits."""
    entry = (study.oracle_version, oracle, oracle._tuneboard_space)
    transaction.on_commit(lambda: _cache.__setitem__(study.id, entry))


def _save_oracle(study: Study, oracle) -> None:
    """Write the oracle state as the next version (the changed Trial row was written with
    that version already)."""
    study.oracle_state = oracle.get_state()
    study.oracle_version += 1
    study.last_activity = timezone.now()
    study.save(update_fields=["oracle_state", "oracle_version", "last_activity"])
    _remember(study, oracle)


@dataclass
class Claim:
    status: str  # "running" | "idle" | "stopped"
    trial: Trial | None = None
    values: dict = field(default_factory=dict)


@dataclass
class Claimant:
    tuner_id: str  # unique per claim: KerasTuner hands a known tuner id its old trial back
    worker_host: str
    worker_name: str = ""


def _claim_locked(study: Study, oracle, claimant: Claimant) -> Claim:
    """Ask the oracle for a trial and write its row; the caller holds the lock and saves
    the oracle state afterwards."""
    kt_trial = oracle.create_trial(claimant.tuner_id)
    if kt_trial.status == TrialStatus.IDLE:
        return Claim("idle")
    if kt_trial.status != TrialStatus.RUNNING:
        trial_services.study_complete_if_done(study=study)
        return Claim("stopped")
    row = trial_services.trial_create_running(
        study=study, trial_id=kt_trial.trial_id, tuner_id=claimant.tuner_id, worker_host=claimant.worker_host,
        worker_name=claimant.worker_name, hyperparameters=kt_trial.hyperparameters.values,
        kt_state=compact_trial_state(kt_trial), oracle_version=study.oracle_version + 1,
    )
    return Claim("running", trial=row, values=dict(kt_trial.hyperparameters.values))


def claim_trial(*, study_id: int, claimant: Claimant) -> Claim:
    with transaction.atomic():
        study = Study.objects.select_for_update().get(pk=study_id)
        if study.status != Study.Status.RUNNING:
            return Claim("stopped")
        if trial_services.trial_running_count(study=study) >= study.parallelism:
            # A duplicated wake-up: the study already has all the trials it may run.
            return Claim("stopped")
        oracle = load_oracle(study)
        claim = _claim_locked(study, oracle, claimant)
        if claim.status == "running":
            _save_oracle(study, oracle)
        return claim


@dataclass
class Outcome:
    status: str  # "completed" | "failed" | "cancelled" | "lost"
    score: float | None = None
    best_step: int | None = None
    metrics: dict = field(default_factory=dict)
    error: str = ""
    checkpoint_id: int | None = None
    duration_seconds: float | None = None


@dataclass
class Finish:
    wake: bool = False  # the study should run another trial: send a wake-up
    claim: Claim | None = None  # or the next trial, claimed in the same transaction


def finish_trial(*, trial_pk: int, outcome: Outcome, stale_before=None, study_id: int | None = None,
                 next_claimant: Claimant | None = None) -> Finish:
    """Record the outcome in the oracle and the Trial row, and say what comes next: with
    `next_claimant`, the next trial is claimed under the same lock (no second oracle load,
    no trip through the broker); otherwise `wake` asks for a wake-up. With `stale_before`
    (the reaper), only a trial whose heartbeat is older than that is finished."""
    with transaction.atomic():
        if study_id is None:
            study_id = Trial.objects.values_list("study_id", flat=True).get(pk=trial_pk)
        study = Study.objects.select_for_update().get(pk=study_id)
        row = Trial.objects.select_for_update().get(pk=trial_pk)
        row.study = study
        if row.status != Trial.Status.RUNNING:
            return Finish()  # finished trials are immutable (the reaper or a cancel got there first)
        if stale_before is not None and row.heartbeat >= stale_before:
            return Finish()  # it heartbeat since the reaper looked: its worker is alive
        oracle = load_oracle(study)
        kt_trial = oracle.trials[row.trial_id]
        failure_limit = ""
        if outcome.status == "cancelled" or study.status != Study.Status.RUNNING:
            _requeue_without_penalty(oracle, kt_trial)
            if outcome.status == "lost":
                trial_services.trial_mark_lost(trial=row, kt_state=compact_trial_state(kt_trial), outcome=outcome)
            else:
                trial_services.trial_mark_cancelled(trial=row, kt_state=compact_trial_state(kt_trial), outcome=outcome)
        elif outcome.status == "completed":
            oracle.update_trial(row.trial_id, {study.objective_metric: outcome.score}, step=outcome.best_step)
            kt_trial.status = TrialStatus.COMPLETED
            oracle.end_trial(kt_trial)
            trial_services.trial_mark_completed(trial=row, kt_state=compact_trial_state(kt_trial), outcome=outcome)
        else:
            # A trial that raised is FAILED for good; a lost one (its worker died) is
            # INVALID, which KerasTuner retries up to max_retries_per_trial.
            kt_trial.status = TrialStatus.INVALID if outcome.status == "lost" else TrialStatus.FAILED
            kt_trial.message = outcome.error
            try:
                oracle.end_trial(kt_trial)
            except RuntimeError:
                # kt raises when max_consecutive_failed_trials is reached, before its own cleanup.
                _drop_ongoing(oracle, kt_trial.trial_id)
                failure_limit = f"{study.max_consecutive_failed_trials} trials failed in a row."
            mark = trial_services.trial_mark_lost if outcome.status == "lost" else trial_services.trial_mark_failed
            mark(trial=row, kt_state=compact_trial_state(kt_trial), outcome=outcome)
        following = _what_next(study, oracle, failure_limit, next_claimant)
        _save_oracle(study, oracle)
        return following


def _what_next(study: Study, oracle, failure_limit: str, next_claimant: Claimant | None) -> Finish:
    if failure_limit:
        trial_services.study_fail_after_failures(study=study, reason=failure_limit)
        return Finish()
    if study.status != Study.Status.RUNNING:
        return Finish()
    running = trial_services.trial_running_count(study=study)
    if trial_services.study_complete_if_done(study=study, oracle_done=_budget_spent(oracle), running=running):
        return Finish()
    if running >= study.parallelism:
        return Finish()  # parallelism was lowered meanwhile: this slot closes
    if next_claimant is None:
        return Finish(wake=True)
    claim = _claim_locked(study, oracle, next_claimant)
    return Finish(wake=claim.status == "idle", claim=claim)


def _drop_ongoing(oracle, trial_id: str) -> None:
    for tuner_id, ongoing in list(oracle.ongoing_trials.items()):
        if ongoing.trial_id == trial_id:
            oracle.ongoing_trials.pop(tuner_id)


def _requeue_without_penalty(oracle, kt_trial) -> None:
    """A cancelled trial is run again on resume with the same values; it is not a failure."""
    _drop_ongoing(oracle, kt_trial.trial_id)
    if kt_trial.trial_id not in oracle._retry_queue:
        oracle._retry_queue.append(kt_trial.trial_id)


def _budget_spent(oracle) -> bool:
    return bool(
        oracle.max_trials
        and len(oracle.trials) >= oracle.max_trials
        and not oracle.ongoing_trials
        and not oracle._retry_queue
    )
