"""Model-based Hyperband (BOHB's scheme with Optuna's TPE as its density model): Hyperband's brackets and
successive halving, but each bracket's new configurations come from a TPE fitted on every configuration's results,
ranked within each budget, instead of at random."""

import hashlib
import math
import random
import warnings

import keras_tuner as kt
import optuna
from optuna.trial import TrialState, create_trial

from workers.tuners.optuna_search import _contains, distributions_of, suggest_values

# BOHB's defaults: a third of the new configurations stay random (so the model cannot lock the search into one
# region), and the model needs one configuration more than there are hyperparameters (and at least 3).
RANDOM_FRACTION = 1 / 3
MIN_OBSERVATIONS = 3


class ModelBasedHyperbandOracle(kt.oracles.HyperbandOracle):
    def _random_values(self):
        """A bracket's new configuration: TPE's proposal from the results so far, else (too few results yet, the
        random share, or a repeat) KerasTuner's random draw. Depends only on the seed and the
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

    def _observations(self, dimensions: int) -> list[tuple[dict, float]]:
        """Each configuration tried so far with how good it was across budgets: at every budget (epochs) its result
        is ranked among that budget's (0 the best, 1 the worst), and a configuration's value is the mean of its
        ranks. Results at different budgets do not compare (a loss after 1 epoch is not one after 27), and the
        largest budget alone holds only the survivors (all good, so a model fitted on them pushes away from them);
        ranks within each budget keep both what survived and what lost. Empty while too few are known."""
        order = {trial_id: i for i, trial_id in enumerate(self.start_order)}
        by_budget: dict[int, list[tuple[float, str]]] = {}
        configs: dict[str, dict] = {}
        for trial in sorted(self.trials.values(), key=lambda t: order.get(t.trial_id, len(order))):
            score = trial.score
            if trial.status != "COMPLETED" or score is None or not math.isfinite(score):
                continue
            values = {k: v for k, v in trial.hyperparameters.values.items() if not k.startswith("tuner/")}
            key = self._compute_values_hash(values)
            configs.setdefault(key, values)
            signed = score if self.objective.direction == "min" else -score
            budget = int(trial.hyperparameters.values.get("tuner/epochs", self.max_epochs))
            by_budget.setdefault(budget, []).append((signed, key))
        if len(configs) < max(dimensions + 1, MIN_OBSERVATIONS):
            return []
        ranks: dict[str, list[float]] = {}
        for results in by_budget.values():
            ordered = sorted(results)
            for place, (_, key) in enumerate(ordered):
                ranks.setdefault(key, []).append(place / (len(ordered) - 1) if len(ordered) > 1 else 0.5)
        return [(configs[key], sum(found) / len(found)) for key, found in ranks.items()]

    def _proposal(self, observed: list, distributions: dict) -> dict | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's "experimental feature" notes
            sampler = optuna.samplers.TPESampler(seed=self._draw_seed("tpe") % 2**31, n_startup_trials=0,
                                                 multivariate=True, group=True)
            study = optuna.create_study(direction="minimize", sampler=sampler)  # the mean rank: 0 is the best
            for values, rank in observed:
                params = {name: values[name] for name, dist in distributions.items()
                          if name in values and _contains(dist, values[name])}
                study.add_trial(create_trial(params=params, distributions={n: distributions[n] for n in params},
                                             value=rank, state=TrialState.COMPLETE))
            values = suggest_values(self.hyperparameters, study.ask(), distributions)
        if self._compute_values_hash(values) in self._tried_so_far:
            return None
        return values

