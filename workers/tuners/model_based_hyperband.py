"""Model-based Hyperband (BOHB's scheme with Optuna's TPE as its density model): Hyperband's brackets and
successive halving, but each bracket's new configurations come from a TPE fitted on the results at the largest
budget that has enough of them, instead of at random."""

import hashlib
import math
import random
import warnings

import keras_tuner as kt
import optuna
from optuna.trial import TrialState, create_trial

from workers.tuners.optuna_search import _contains, distributions_of, suggest_values

# BOHB's defaults: a third of the new configurations stay random (so the model cannot lock the search into one
# region), and the model needs one observation more than there are hyperparameters at a budget.
RANDOM_FRACTION = 1 / 3
MIN_OBSERVATIONS = 3


class ModelBasedHyperbandOracle(kt.oracles.HyperbandOracle):
    def _random_values(self):
        """A bracket's new configuration: TPE's proposal over the largest budget with enough results, else (too few
        results yet, the random share, or a repeat) KerasTuner's random draw. Depends only on the seed and the
        trials so far, so any worker that rebuilds the oracle proposes the same."""
        distributions = distributions_of(self.hyperparameters)
        observed = self._observations(len(distributions))
        draw = random.Random(self._draw_seed("share"))
        if not observed or not distributions or draw.random() < RANDOM_FRACTION:
            return super()._random_values()
        values = self._proposal(observed, distributions)
        if values is None:
            return super()._random_values()
        self._tried_so_far.add(self._compute_values_hash(values))
        return values

    def _draw_seed(self, what: str) -> int:
        text = f"{self.seed}-{len(self.trials)}-{what}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")

    def _observations(self, dimensions: int) -> list:
        """The completed trials at the largest budget (epochs) with enough of them, in the order they started."""
        by_budget: dict[int, list] = {}
        order = {trial_id: i for i, trial_id in enumerate(self.start_order)}
        for trial in sorted(self.trials.values(), key=lambda t: order.get(t.trial_id, len(order))):
            score = trial.score
            if trial.status != "COMPLETED" or score is None or not math.isfinite(score):
                continue
            budget = trial.hyperparameters.values.get("tuner/epochs")
            if budget is not None:
                by_budget.setdefault(int(budget), []).append(trial)
        enough = max(dimensions + 1, MIN_OBSERVATIONS)
        budgets = [budget for budget, trials in by_budget.items() if len(trials) >= enough]
        return by_budget[max(budgets)] if budgets else []

    def _proposal(self, observed: list, distributions: dict) -> dict | None:
        direction = "maximize" if self.objective.direction == "max" else "minimize"
        sampler = optuna.samplers.TPESampler(seed=self._draw_seed("tpe") % 2**31, n_startup_trials=0,
                                             multivariate=True, group=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's "experimental feature" notes
            study = optuna.create_study(direction=direction, sampler=sampler)
            for trial in observed:
                values = trial.hyperparameters.values
                params = {name: values[name] for name, dist in distributions.items()
                          if name in values and _contains(dist, values[name])}
                study.add_trial(create_trial(params=params, distributions={n: distributions[n] for n in params},
                                             value=float(trial.score), state=TrialState.COMPLETE))
            values = suggest_values(self.hyperparameters, study.ask(), distributions)
        if self._compute_values_hash(values) in self._tried_so_far:
            return None
        return values

