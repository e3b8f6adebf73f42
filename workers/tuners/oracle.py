"""The KerasTuner adapter: rebuilds, asks and ends oracles whose state lives in PostgreSQL, never touching the
database itself (services/trial_claims.py holds the lock and the rows)."""

import collections
import contextlib
import copy
import hashlib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import keras_tuner as kt
from keras_tuner.src.engine import metrics_tracking
from keras_tuner.src.engine.trial import Trial as KtTrial
from keras_tuner.src.engine.trial import TrialStatus
from keras_tuner.src.tuners.gridsearch import LinkedList

from experiments.services.studies import EXTENDED
from experiments.tuning.space_values import default_initial_random_trials
from workers.tuners import model_based_hyperband
from workers.tuners.bayesian import CONSTRAINT_METRIC, GaussianProcessSearch
from workers.tuners.hyperparameters import to_hyperparameters, typed_values
from workers.tuners.optuna_search import BROKEN, OptunaSearch


class _StateInPostgres:
    """Oracles whose state lives in PostgreSQL: KerasTuner's file writes are skipped, and failures in a row count from
    the study's last start so a FAILED study resumes."""

    failures_counted_from = 0
    failure_limit_reached = False

    def save(self):
        pass

    def _save_trial(self, trial):
        pass

    def _check_consecutive_failures(self):
        consecutive = 0
        for trial_id in self.end_order[self.failures_counted_from:]:
            consecutive = consecutive + 1 if self.trials[trial_id].status == TrialStatus.FAILED else 0
            if consecutive >= self.max_consecutive_failed_trials:
                self.failure_limit_reached = True


class RandomSearchOracle(_StateInPostgres, kt.oracles.RandomSearchOracle):
    pass


class BayesianOptimizationOracle(_StateInPostgres, GaussianProcessSearch):
    pass


class HyperbandOracle(_StateInPostgres, kt.oracles.HyperbandOracle):
    pass


class ModelBasedHyperbandOracle(_StateInPostgres, model_based_hyperband.ModelBasedHyperbandOracle):
    pass


class OptunaOracle(_StateInPostgres, OptunaSearch):
    pass


OPTUNA_TUNERS = {"optuna_tpe": "tpe", "optuna_gp": "gp", "optuna_nsga2": "nsga2"}


class ResumableGridSearchOracle(_StateInPostgres, kt.oracles.GridSearchOracle):
    """GridSearchOracle with its place in the grid carried in the state (a rebuilt one would stop after the first
    trial), warm-start seeds taking their grid slot."""

    def populate_space(self, trial_id):
        # KerasTuner 1.4.8's GridSearchOracle.populate_space, with seeds taking their places.
        pending = [] if self._ordered_ids._memory else [(None, self._first_values())]
        while pending or self._populate_next:
            if pending:
                after, values = pending.pop()
            else:
                after = self._populate_next.pop(0)
                values = self._get_next_combination(self.trials[after].hyperparameters.values)
                if values is None:
                    continue
                next_id = self._ordered_ids.next(after)
                if next_id is not None and self._compare(values, self.trials[next_id].hyperparameters.values) >= 0:
                    continue
            seed_id = self._seed_with(values)
            if seed_id is None:
                self._ordered_ids.insert(trial_id, after)
                if after is None:
                    self._populate_next.append(trial_id)
                return {"status": TrialStatus.RUNNING, "values": values}
            self._ordered_ids.insert(seed_id, after)
            if self.trials[seed_id].status not in (TrialStatus.RUNNING, TrialStatus.IDLE):
                self._populate_next.append(seed_id)  # it ended before the walk got here
        if self.ongoing_trials:
            return {"status": TrialStatus.IDLE, "values": None}
        return {"status": TrialStatus.STOPPED, "values": None}

    def _first_values(self) -> dict:
        space = self.get_space()
        return {hp.name: hp.default for hp in space.space if space.is_active(hp)}

    def _seed_with(self, values: dict) -> str | None:
        """A trial outside the walk (a seed) with these values; == so 16.0 matches 16."""
        walked = self._ordered_ids._data_to_index
        return next((trial_id for trial_id, trial in self.trials.items()
                     if trial_id not in walked and trial.hyperparameters.values == values), None)

    def end_trial(self, trial):
        # GridSearchOracle's own end_trial queues every trial for the walk; a seed joins it
        # only once the walk reaches its values (populate_space).
        super(kt.oracles.GridSearchOracle, self).end_trial(trial)
        if trial.trial_id in self._ordered_ids._data_to_index:
            self._populate_next.append(trial.trial_id)

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


HYPERBAND_ITERATIONS = 10**6  # "until max_trials"; a number, as the state is JSON


def tuner_seed(seed: int | None) -> int | None:
    """The study's seed spread before KerasTuner sees it. Its oracles draw with seed, seed + 1, seed + 2...
    (one per value drawn), so studies seeded 1 and 2 would draw the same values shifted by one; a hash
    puts nearby seeds far apart, and the same seed still gives the same sequence on any worker."""
    if seed is None:
        return None
    return int.from_bytes(hashlib.sha256(f"tuneboard-study-seed-{seed}".encode()).digest()[:4], "big") % 2**31


def _new_oracle(study):
    common = dict(
        objective=kt.Objective(study.objective_metric, direction=study.objective_direction),
        hyperparameters=to_hyperparameters(study.search_space),
        # Hyperparameters a hypermodel asks for but the study did not list keep their defaults.
        tune_new_entries=False,
        allow_new_entries=True,
        seed=tuner_seed(study.seed),
        max_retries_per_trial=study.max_retries_per_trial,
        max_consecutive_failed_trials=study.max_consecutive_failed_trials,
    )
    if study.tuner == study.Tuner.HYPERBAND:
        # Hyperband brackets repeat until the study's max_trials (load_oracle) is spent: as many
        # iterations as that takes (KerasTuner's default stops after one).
        oracle = HyperbandOracle(max_epochs=study.epochs, factor=3, hyperband_iterations=HYPERBAND_ITERATIONS, **common)
    elif study.tuner == study.Tuner.HYPERBAND_TPE:
        oracle = ModelBasedHyperbandOracle(max_epochs=study.epochs, factor=3, hyperband_iterations=HYPERBAND_ITERATIONS,
                                           **common)
    elif study.tuner == study.Tuner.BAYESIAN:
        oracle = BayesianOptimizationOracle(max_trials=study.max_trials,
                                            num_initial_points=study.initial_random_trials
                                            or default_initial_random_trials(study.search_space, study.max_trials),
                                            **common)
    elif study.tuner == study.Tuner.GRID:
        oracle = ResumableGridSearchOracle(max_trials=study.max_trials, **common)
    elif study.tuner in OPTUNA_TUNERS:
        oracle = OptunaOracle(sampler=OPTUNA_TUNERS[study.tuner], max_trials=study.max_trials,
                              extra_objectives=study.extra_objectives, constraints=len(study.constraints),
                              num_initial_points=study.initial_random_trials
                              or default_initial_random_trials(study.search_space, study.max_trials), **common)
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
# Given the oracle version already rebuilt, the (hyperparameters, kt_state) of every Trial row
# written since, oldest first: trial_oracle.trial_rows_for_oracle.
TrialRowsSince = Callable[[int], Iterable[tuple[dict, dict]]]


def load_oracle(study, trial_rows_since: TrialRowsSince):
    cached = _cache.pop(study.id, None)
    # An extension may change the tuner or its epochs: an oracle cached before it is another oracle.
    if cached is not None and cached[0] <= study.oracle_version and getattr(cached[1], "_tuneboard_segments", 0) == len(
            study.segments):
        version, oracle, space = cached
    else:
        version, oracle = 0, _new_oracle(study)
        space = oracle.hyperparameters
        oracle.trials = {}
    if version < study.oracle_version:
        # Only the trials written since our version; later attempts of a retried trial win.
        for values, state in trial_rows_since(version):
            oracle.trials[state["trial_id"]] = _trial_from_row(space, values, state)
        if study.oracle_state:
            oracle.set_state(_extended_state(oracle, study.oracle_state))
    oracle._tuneboard_segments = len(study.segments)
    oracle.max_trials = study.max_trials  # editable while the study runs
    oracle._tuneboard_space = space
    return oracle


def _extended_state(oracle, state: dict) -> dict:
    """After an extension the state holds only what every oracle keeps (services/study_extensions.py): the new tuner's
    own part starts fresh (new brackets, a new grid walk) and its model sees every trial so far."""
    if EXTENDED not in state:
        return state
    return {**oracle.get_state(), **state[EXTENDED]}


@dataclass
class Proposal:
    status: str  # "running" | "idle" (wait for a running trial to end) | "stopped" (nothing left)
    trial_id: str = ""
    values: dict = field(default_factory=dict)
    state: dict = field(default_factory=dict)
    seeded: bool = False  # the values are the warm-start seed the claim offered
    retry: bool = False  # a trial the tuner handed out before (its earlier attempts have rows)


@contextlib.contextmanager
def _offering(oracle, seed: dict | None):
    """While open, the oracle's next new trial takes `seed` as its values through create_trial, so it is recorded and
    counted like any other."""
    taken: list[bool] = []
    if seed is None:
        yield taken
        return

    def seed_values():
        taken.append(True)
        return dict(seed)

    if isinstance(oracle, kt.oracles.HyperbandOracle):  # plain and model-based
        name, replacement = "_random_values", seed_values
    else:
        name, replacement = "populate_space", lambda trial_id: {"status": TrialStatus.RUNNING,
                                                                "values": seed_values()}
    setattr(oracle, name, replacement)  # on the instance, over the class's method
    try:
        yield taken
    finally:
        delattr(oracle, name)


@dataclass
class Ended:
    state: dict
    failure_limit_reached: bool = False


class KerasTunerOracles:
    """What `trial_claims` asks of a tuner. Every method but `keep` runs under the Study row lock;
    `keep` runs once the transaction that held it commits."""

    def load(self, study, trial_rows_since: TrialRowsSince):
        oracle = load_oracle(study, trial_rows_since)
        oracle.failures_counted_from = study.failures_counted_from
        oracle.failure_limit_reached = False
        return oracle

    def propose(self, study, oracle, tuner_id: str, seed: dict | None = None) -> Proposal:
        known = set(oracle.trials)
        with _offering(oracle, seed) as taken:
            kt_trial = oracle.create_trial(tuner_id)
        if kt_trial.status == TrialStatus.IDLE:
            return Proposal("idle")
        if kt_trial.status != TrialStatus.RUNNING:
            return Proposal("stopped")
        # Values in their hyperparameter's own type (GridSearch yields 16.0 for a log Int):
        # what the hypermodel gets, what is stored, and what the oracle keeps are the same.
        kt_trial.hyperparameters.values = typed_values(kt_trial.hyperparameters)
        return Proposal("running", kt_trial.trial_id, dict(kt_trial.hyperparameters.values),
                        compact_trial_state(kt_trial), seeded=bool(taken), retry=kt_trial.trial_id in known)

    def complete(self, oracle, trial_id: str, *, objective: str, score: float, best_step: int | None,
                 extra: dict | None = None, violations: list[float] | None = None) -> Ended:
        """`extra`: the other objectives' values; `violations`: each constraint's (> 0: broken),
        kept as trial metrics (CONSTRAINT_METRIC) for the tuners that model them."""
        kt_trial = oracle.trials[trial_id]
        metrics = {objective: score}
        metrics.update({name: value for name, value in (extra or {}).items()
                        if value is not None and math.isfinite(value)})
        metrics.update({CONSTRAINT_METRIC.format(i): min(value, BROKEN) for i, value in enumerate(violations or [])})
        oracle.update_trial(trial_id, metrics, step=0 if best_step is None else best_step)
        kt_trial.status = TrialStatus.COMPLETED
        oracle.end_trial(kt_trial)
        return Ended(compact_trial_state(kt_trial), oracle.failure_limit_reached)

    def fail(self, oracle, trial_id: str, *, error: str, lost: bool) -> Ended:
        """A trial that raised is FAILED for good; a lost one (its worker died) is INVALID,
        which KerasTuner retries up to max_retries_per_trial."""
        kt_trial = oracle.trials[trial_id]
        kt_trial.status = TrialStatus.INVALID if lost else TrialStatus.FAILED
        kt_trial.message = error
        oracle.end_trial(kt_trial)
        return Ended(compact_trial_state(kt_trial), oracle.failure_limit_reached)

    def release(self, oracle, trial_id: str) -> Ended:
        """Run it again later with the same values, without counting it as a failure (a
        cancelled study, a trial stopped by a worker shutting down)."""
        for tuner_id, ongoing in list(oracle.ongoing_trials.items()):
            if ongoing.trial_id == trial_id:
                oracle.ongoing_trials.pop(tuner_id)
        if trial_id not in oracle._retry_queue:
            oracle._retry_queue.append(trial_id)
        return Ended(compact_trial_state(oracle.trials[trial_id]))

    def done(self, oracle) -> bool:
        """The budget is spent: every trial started and none is running or waiting for a retry."""
        return bool(oracle.max_trials and len(oracle.trials) >= oracle.max_trials
                    and not oracle.ongoing_trials and not oracle._retry_queue)

    def state(self, oracle) -> dict:
        """The state to save; the caller writes it as oracle_version + 1 in this transaction."""
        return oracle.get_state()

    def keep(self, study_id: int, version: int, oracle) -> None:
        """Keep the oracle (as of `version`) for the study's next load in this process."""
        _cache[study_id] = (version, oracle, oracle._tuneboard_space)
