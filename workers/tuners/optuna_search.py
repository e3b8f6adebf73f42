"""Optuna's samplers (TPE, GP, NSGA-II) as KerasTuner oracles, so they share the KerasTuner tuners' claim path
and PostgreSQL state (docs/design/distributed-search.md)."""

import importlib.util
import math
import socket
import warnings

import optuna
from keras_tuner.src.engine import hyperparameters as hp_module
from keras_tuner.src.engine import oracle as oracle_module
from keras_tuner.src.engine.trial import TrialStatus
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState, create_trial

from experiments.errors import TunerUnavailable
from workers.tuners.bayesian import CONSTRAINT_METRIC

_CONSTRAINTS_KEY = "constraints"  # optuna/study/_constrained_optimization.py: what samplers read
BROKEN = 1e12  # a constraint on a metric the trial did not report

optuna.logging.set_verbosity(optuna.logging.WARNING)

SAMPLERS = ("tpe", "gp", "nsga2")


class OptunaSearch(oracle_module.Oracle):
    def __init__(self, *, sampler: str, num_initial_points: int | None = None, extra_objectives=(),
                 constraints: int = 0, **kwargs):
        """`extra_objectives`: the study's other objectives ([{"metric", "direction"}]), read from
        each trial's metrics; `constraints`: how many, their violations read likewise."""
        super().__init__(**kwargs)
        if sampler not in SAMPLERS:
            raise ValueError(f"Unknown Optuna sampler {sampler!r}.")
        self.sampler = sampler
        self.num_initial_points = num_initial_points
        self.extra_objectives = list(extra_objectives)
        self.constraint_count = constraints
        self.trial_attrs: dict[str, dict] = {}  # trial id -> what the sampler recorded on it

    def get_state(self):
        state = super().get_state()
        state["optuna"] = {"sampler": self.sampler, "trial_attrs": self.trial_attrs}
        return state

    def set_state(self, state):
        super().set_state(state)
        self.trial_attrs = dict((state.get("optuna") or {}).get("trial_attrs") or {})

    # --- the proposal ----------------------------------------------------------------------------

    def populate_space(self, trial_id):
        distributions = distributions_of(self.hyperparameters)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's "experimental feature" notes
            directions = [self.objective.direction] + [row["direction"] for row in self.extra_objectives]
            study = optuna.create_study(directions=["maximize" if d == "max" else "minimize" for d in directions],
                                        sampler=self._sampler())
            # Every trial, in a fixed order: Optuna's ids (which NSGA-II's parent records name)
            # are then the same in every rebuild.
            study.add_trials([self._frozen(trial, distributions) for trial in self._ordered_trials()])
            asked = study.ask()
            values = self._suggest(asked, distributions)
        if self._duplicate(values):
            # The sampler repeated a tried configuration (a small or coarse space): random values
            # instead, or STOPPED once the space is exhausted.
            return self._random_populate_space()
        attrs = _json_safe(study.get_trials(deepcopy=False)[-1].system_attrs)
        if attrs:
            self.trial_attrs[trial_id] = attrs
        return {"status": TrialStatus.RUNNING, "values": values}

    def _random_populate_space(self):
        values = self._random_values()
        if values is None:
            return {"status": TrialStatus.STOPPED, "values": None}
        return {"status": TrialStatus.RUNNING, "values": values}

    def _sampler(self):
        # The seed moves with the history: the same history gives the same proposal anywhere.
        seed = ((self.seed or 0) * 1_000_003 + len(self.trials)) % (2**31)
        initial = self.num_initial_points or 10
        if self.sampler == "tpe":
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=initial, multivariate=True, group=True,
                                              constant_liar=True)
        if self.sampler == "gp":
            if not _torch_installed():
                raise TunerUnavailable("Optuna's Gaussian-process tuner needs PyTorch on the worker, and this "
                                       f"worker ({socket.gethostname()}) has none: install it there (pip install "
                                       "'.[gp]', the CPU build is enough) or choose another tuner.")
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=initial)
        population = min(50, max(4, (self.max_trials or 40) // 5))  # several generations in the budget
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=population)

    def _ordered_trials(self):
        """In the order they started (Optuna numbers trials as they are added)."""
        order = {trial_id: i for i, trial_id in enumerate(self.start_order)}
        return sorted(self.trials.values(), key=lambda t: order.get(t.trial_id, len(order)))

    def _frozen(self, trial, distributions: dict):
        """A KerasTuner trial as Optuna's record of it: completed with its score, running, or
        failed (failed, lost for good, or with no usable score)."""
        values = trial.hyperparameters.values
        params = {name: values[name] for name, dist in distributions.items()
                  if name in values and _contains(dist, values[name])}
        known = {name: distributions[name] for name in params}
        attrs = self.trial_attrs.get(trial.trial_id, {})
        values = self._objective_values(trial)
        if trial.status == TrialStatus.COMPLETED and values is not None:
            constraints = {f"{_CONSTRAINTS_KEY}:{i}": _last(trial, CONSTRAINT_METRIC.format(i), BROKEN)
                           for i in range(self.constraint_count)}
            return create_trial(params=params, distributions=known, values=values, state=TrialState.COMPLETE,
                                system_attrs={**attrs, **constraints})
        if trial.status == TrialStatus.RUNNING:
            return create_trial(params=params, distributions=known, state=TrialState.RUNNING, system_attrs=attrs)
        return create_trial(params=params, distributions=known, state=TrialState.FAIL, system_attrs=attrs)

    def _objective_values(self, trial) -> list[float] | None:
        """Its score and each other objective's value, or None when one is missing."""
        values = [trial.score] + [_last(trial, row["metric"], None) for row in self.extra_objectives]
        if any(v is None or not math.isfinite(v) for v in values):
            return None
        return [float(v) for v in values]

    def _suggest(self, asked, distributions: dict) -> dict:
        return suggest_values(self.hyperparameters, asked, distributions)


def suggest_values(hyperparameters, asked, distributions: dict) -> dict:
    """The active hyperparameters' values an Optuna trial `asked` for, parents before children (the space's order)."""
    chosen = hyperparameters.copy()
    chosen.values = {}
    for hp in chosen.space:
        if not chosen.is_active(hp):
            continue
        if isinstance(hp, hp_module.Fixed):
            chosen.values[hp.name] = hp.value
            continue
        value = _suggest(asked, hp.name, distributions[hp.name])
        if isinstance(hp, hp_module.Choice | hp_module.Boolean):
            chosen.values[hp.name] = value
        elif hp.sampling == "log" and hp.step:
            chosen.values[hp.name] = hp.prob_to_value(hp.value_to_prob(value))  # KerasTuner's log step
        else:
            chosen.values[hp.name] = int(value) if isinstance(hp, hp_module.Int) else float(value)
    return chosen.values


def distributions_of(hyperparameters) -> dict:
    """Optuna's distribution for each tuned (not fixed) hyperparameter of a KerasTuner space."""
    return {hp.name: _distribution(hp) for hp in hyperparameters.space if not isinstance(hp, hp_module.Fixed)}


def _last(trial, metric: str, default):
    return trial.metrics.get_last_value(metric) if trial.metrics.exists(metric) else default


def _torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def _distribution(hp):
    if isinstance(hp, hp_module.Boolean):
        return CategoricalDistribution((False, True))
    if isinstance(hp, hp_module.Choice):
        return CategoricalDistribution(tuple(hp.values))
    log = hp.sampling == "log"
    step = None if log or not hp.step else hp.step
    if isinstance(hp, hp_module.Int):
        step = step or 1
        high = hp.min_value + (hp.max_value - hp.min_value) // step * step  # the last value on the step
        return IntDistribution(hp.min_value, high, log=log, step=1 if log else step)
    if step:
        high = hp.min_value + math.floor((hp.max_value - hp.min_value) / step + 1e-9) * step
        return FloatDistribution(hp.min_value, high, step=step)
    return FloatDistribution(hp.min_value, hp.max_value, log=log)


def _suggest(asked, name: str, distribution):
    if isinstance(distribution, CategoricalDistribution):
        return asked.suggest_categorical(name, distribution.choices)
    if isinstance(distribution, IntDistribution):
        return asked.suggest_int(name, distribution.low, distribution.high, step=distribution.step,
                                 log=distribution.log)
    return asked.suggest_float(name, distribution.low, distribution.high, step=distribution.step,
                               log=distribution.log)


def _contains(distribution, value) -> bool:
    try:
        return distribution._contains(distribution.to_internal_repr(value))
    except (ValueError, TypeError):
        return False


def _json_safe(attrs: dict) -> dict:
    """What a later proposal reads (NSGA-II's generation and parents), JSON-safe; TPE's and the
    GP's relative parameters matter only while a trial is being sampled."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in attrs.items()
            if "relative_params" not in key}
