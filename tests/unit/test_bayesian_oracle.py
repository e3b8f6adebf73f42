"""KerasTuner's own Bayesian oracle tests (keras_tuner/tuners/bayesian_test.py, 1.4.8), adapted to
Tuneboard's Bayesian tuner and driven the way the claim path drives it: every claim and every
finish rebuilds the oracle from the stored trial rows and state (no oracle kept in memory), as
when workers on different hosts take turns. Their save/reload case is this rebuild. The two
searches that must find an optimum pass for each of 20 seeds."""

import math

import pytest

from experiments.models import Study
from workers.tuners import oracle as adapter

ORACLES = adapter.KerasTunerOracles()
SEEDS = range(1, 21)


def _float(name, low, high, **extra):
    return {"name": name, "type": "float", "min": low, "max": high, "step": None, "sampling": "linear", **extra}


class Search:
    """A Bayesian study's oracle as PostgreSQL keeps it: trial rows and the oracle state."""

    def __init__(self, space, *, direction="max", max_trials=20, seed=1, initial=None):
        self.study = Study(id=seed, tuner="bayesian", search_space=space, seed=seed, objective_metric="score",
                           objective_direction=direction, max_trials=max_trials, initial_random_trials=initial,
                           max_retries_per_trial=0, max_consecutive_failed_trials=3, epochs=1, oracle_state={},
                           oracle_version=0, failures_counted_from=0)
        self.rows: dict[str, tuple[dict, dict]] = {}

    def _oracle(self):
        adapter._cache.clear()
        return ORACLES.load(self.study, lambda since: list(self.rows.values()))

    def _store(self, oracle, trial_id, values, state):
        self.rows[trial_id] = (values, state)
        self.study.oracle_state, self.study.oracle_version = ORACLES.state(oracle), self.study.oracle_version + 1

    def claim(self, tuner_id="t0") -> adapter.Proposal:
        oracle = self._oracle()
        proposal = ORACLES.propose(self.study, oracle, tuner_id)
        if proposal.status == "running":
            self._store(oracle, proposal.trial_id, proposal.values, proposal.state)
        return proposal

    def finish(self, proposal, score: float) -> None:
        oracle = self._oracle()
        ended = ORACLES.complete(oracle, proposal.trial_id, objective="score", score=score, best_step=0)
        self._store(oracle, proposal.trial_id, proposal.values, ended.state)

    def best(self):
        scored = [(state["score"], values) for values, state in self.rows.values() if state["score"] is not None]
        return (max if self.study.objective_direction == "max" else min)(scored, key=lambda pair: pair[0])


def polynomial(v):
    return -v["a"] ** 3 + v["b"] ** 3 + v["c"] - abs(v["d"])


@pytest.mark.parametrize("seed", SEEDS)
def test_it_finds_the_corner_where_a_polynomial_of_four_floats_peaks(seed):
    search = Search([_float(name, -1.0, 1.0) for name in "abcd"], max_trials=50, seed=seed)
    for _ in range(50):
        proposal = search.claim()
        search.finish(proposal, polynomial(proposal.values))
    score, best = search.best()
    # KerasTuner's tolerances: atol 0.1 and rtol 0.1 around the optimum (3 at a=-1, b=1, c=1, d=0).
    assert math.isclose(score, 3, abs_tol=0.1 + 0.1 * 3), (score, best)
    for name, optimum in (("a", -1), ("b", 1), ("c", 1), ("d", 0)):
        assert math.isclose(best[name], optimum, abs_tol=0.1 + 0.1 * abs(optimum)), (name, best)


def distributed_objective(v):
    return abs(v["a"] - 4) - v["b"] + 0.1 * abs(3 + math.log10(v["c"]))


@pytest.mark.parametrize("seed", SEEDS)
def test_four_workers_claiming_side_by_side_find_the_minimum(seed):
    space = [{"name": "a", "type": "int", "min": 0, "max": 10, "step": 1, "sampling": "linear"},
             _float("b", -1.0, 1.0, step=0.1), _float("c", 1e-5, 1e-2, sampling="log")]
    search = Search(space, direction="min", max_trials=60, seed=seed)
    for _ in range(10):
        # Four claims before any finishes: the running ones are guessed pessimistically.
        running = [search.claim(f"worker{i}") for i in range(4)]
        assert all(p.status == "running" for p in running)
        assert len({tuple(sorted(p.values.items())) for p in running}) == 4, "two workers got the same trial"
        for proposal in running:
            search.finish(proposal, distributed_objective(proposal.values))
    score, best = search.best()
    assert score < -0.8, best
    assert math.isclose(best["a"], 4, abs_tol=0.1 + 0.4) and math.isclose(best["b"], 1, abs_tol=0.2), best
    assert -4 < math.log10(best["c"]) < -2, best


def _seeded(search, pairs):
    """Completed trials with these (value of "a", score), as a study's earlier results."""
    for a, score in pairs:
        proposal = search.claim()
        search.rows[proposal.trial_id] = ({**proposal.values, "a": a}, proposal.state)
        search.finish(adapter.Proposal("running", proposal.trial_id, {**proposal.values, "a": a}), score)


def test_it_proposes_where_it_expects_the_maximum():
    search = Search([{"name": "a", "type": "int", "min": -100, "max": 100, "step": 1, "sampling": "linear"}],
                    initial=2)
    _seeded(search, [(10 * i, i) for i in range(5)] + [(-10 * i, -i) for i in range(1, 5)])
    assert search.claim().values["a"] > 0


def test_it_proposes_only_values_on_the_step():
    search = Search([_float("c", 0.0, 10.0, step=3.0)], initial=2)
    proposed = []
    while (proposal := search.claim()).status == "running":
        proposed.append(proposal.values["c"])
        search.finish(proposal, float(len(proposed)))
    assert sorted(proposed) == [0, 3, 6, 9]  # each value on the step once, then the space is exhausted


def test_it_goes_on_when_every_score_is_zero():
    search = Search([{"name": "a", "type": "choice", "values": [1, 2], "ordered": False},
                     {"name": "b", "type": "int", "min": 3, "max": 10, "step": 1, "sampling": "linear"},
                     _float("c", 0.0, 1.0, step=0.1)], initial=2)
    for _ in range(6):
        proposal = search.claim()
        assert proposal.status == "running"
        search.finish(proposal, 0.0)


def test_a_small_space_runs_out_and_the_search_stops():
    search = Search([{"name": "x", "type": "boolean"}, {"name": "y", "type": "boolean"}], max_trials=15, initial=2)
    seen = []
    while (proposal := search.claim()).status == "running":
        seen.append((proposal.values["x"], proposal.values["y"]))
        search.finish(proposal, float(len(seen)))
        assert len(seen) <= 15
    assert sorted(seen) == sorted({(x, y) for x in (False, True) for y in (False, True)})


def test_the_kernel_refit_starts_afresh_and_its_length_scales_stay_off_the_lower_bound():
    search = Search([_float(name, -1.0, 1.0) for name in "abcd"], max_trials=40, seed=3)
    for _ in range(40):
        proposal = search.claim()
        search.finish(proposal, polynomial(proposal.values))
    kernel = search.study.oracle_state["gp_kernel"]
    low = math.log(adapter.BayesianOptimizationOracle.LENGTH_SCALE_BOUNDS[0])
    assert kernel["fitted_on"] >= 30 and len(kernel["theta"]) == 4
    assert all(theta > low + 1e-6 for theta in kernel["theta"]), kernel


@pytest.mark.parametrize("dims", [1, 4])
def test_the_posterior_gives_gaussian_process_regressors_own_numbers(dims):
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Matern

    from workers.tuners.bayesian import Posterior

    rng = np.random.default_rng(dims)
    x, points = rng.uniform(size=(30, dims)), rng.uniform(size=(200, dims))
    y = np.sin(4 * x).sum(axis=1) + rng.normal(scale=0.05, size=30)
    kernel = Matern(nu=2.5, length_scale=rng.uniform(0.1, 2, size=dims))
    gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, alpha=1e-4, optimizer=None).fit(x, y)
    expected_mean, expected_std = gp.predict(points, return_std=True)
    mean, std = Posterior(gp)(points)
    assert np.array_equal(mean, expected_mean) and np.array_equal(std, expected_std)
    one_mean, one_std = Posterior(gp)(points[0])  # one point, as L-BFGS-B passes it
    expected_mean, expected_std = gp.predict(points[:1], return_std=True)
    assert one_mean.shape == (1,) and one_mean[0] == expected_mean[0] and one_std[0] == expected_std[0]
    assert np.array_equal(Posterior(gp)(x)[1] == 0, gp.predict(x, return_std=True)[1] == 0)  # clipped alike
