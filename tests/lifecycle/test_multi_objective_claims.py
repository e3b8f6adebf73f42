"""Several objectives and constraints in the claim path against PostgreSQL: every tuner allowed
for several objectives completes a study with them; a trial that breaks a constraint is marked
infeasible; Optuna's samplers are told each objective and constraint (and learn to avoid the
infeasible region), and the Bayesian tuner scores an infeasible trial as the worst result."""

import math

import pytest

from experiments.models import Study, Trial
from experiments.selectors.trials import pareto_rows
from experiments.services import studies, trial_claims, trial_oracle
from experiments.services.trial_oracle import Claimant, Outcome
from tests.integration.helpers import saved_study
from tests.lifecycle.test_optuna_tuners import SPACE
from workers.tuners import oracle as adapter
from workers.tuners.bayesian import violated

ORACLES = adapter.KerasTunerOracles()
pytestmark = pytest.mark.django_db
TWO_OBJECTIVES = {"extra_objectives": [{"metric": "params", "direction": "min"}]}
SMALL = {"constraints": [{"metric": "params", "op": "<=", "value": 1500}]}


def measured(values: dict) -> dict:
    """Accuracy rises with units and peaks at a learning rate of 0.003; params grow with units."""
    accuracy = 0.5 + values["units"] / 128 - (math.log10(values["learning_rate"]) + 2.5) ** 2 / 20
    return {"val_accuracy": accuracy, "params": 100.0 * values["units"]}


def run(study, trials: int) -> list[Trial]:
    for i in range(trials):
        adapter._cache.clear()
        claimed = trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=f"w{i}", worker_host="h"),
                                         oracles=ORACLES)
        assert claimed.status == "running", claimed.status
        metrics = measured(claimed.trial.hyperparameters)
        adapter._cache.clear()
        trial_claims.finish_trial(trial_pk=claimed.trial.pk, oracles=ORACLES, outcome=Outcome(
            "completed", score=metrics["val_accuracy"], best_step=0, metrics=metrics))
    return list(Trial.objects.filter(study=study).order_by("number"))


@pytest.mark.parametrize("tuner", ["random", "optuna_tpe", "optuna_gp", "optuna_nsga2"])
def test_a_two_objective_study_completes_with_a_front_of_feasible_trials(acme, alice, iris, tuner):
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner=tuner, search_space=SPACE,
                                                  max_trials=12, seed=2, **TWO_OBJECTIVES, **SMALL))
    trials = run(study, 12)
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED, study.message
    assert all(t.feasible is (t.metrics["params"] <= 1500) for t in trials)
    front = pareto_rows(study=study)
    assert front and all(row["trial"].feasible for row in front)
    feasible = [t for t in trials if t.feasible]
    for row in front:  # no feasible trial beats a front trial on both objectives
        accuracy, params = row["values"]
        assert not any(t.score >= accuracy and t.metrics["params"] <= params
                       and (t.score > accuracy or t.metrics["params"] < params) for t in feasible)
    told = trials[-1].kt_state["metrics"]["metrics"]
    assert {"val_accuracy", "params", "tuneboard/constraint_0"} <= set(told)  # what the tuner was told


def test_optuna_tpe_learns_to_stay_inside_the_constraint(acme, alice, iris):
    # Units above 15 break params <= 1500: most of the space (4 to 64 units) is infeasible, and
    # the most accurate configurations lie there.
    # Over three seeds: one seed's 10 trials are too few to tell a tendency from a draw.
    early = late = 0
    for seed in (4, 5, 6):
        study = studies.study_start(study=saved_study(acme, alice, iris, tuner="optuna_tpe", search_space=SPACE,
                                                      max_trials=30, initial_random_trials=8, seed=seed,
                                                      name=f"constrained-{seed}", **SMALL))
        trials = run(study, 30)
        early += sum(not t.feasible for t in trials[:10])
        late += sum(not t.feasible for t in trials[-10:])
    assert late < early, (early, late)


def test_the_bayesian_tuner_scores_an_infeasible_trial_as_the_worst_seen(acme, alice, iris):
    half = {"constraints": [{"metric": "params", "op": "<=", "value": 3200}]}  # units up to 32 of 64
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner="bayesian", search_space=SPACE,
                                                  max_trials=8, initial_random_trials=5, seed=3, **half))
    trials = run(study, 6)
    oracle = ORACLES.load(Study.objects.get(pk=study.pk), trial_oracle.trial_rows_for_oracle(study))
    completed = [t for t in oracle.trials.values() if t.status == "COMPLETED"]
    x, y = oracle._completed_vectors(completed)
    broken = [violated(t) for t in completed]
    assert broken == [not t.feasible for t in trials] and any(broken) and not all(broken)
    worst_feasible = max(v for v, b in zip(y, broken, strict=True) if not b)  # framed as a minimisation
    assert all(v == worst_feasible for v, b in zip(y, broken, strict=True) if b)
