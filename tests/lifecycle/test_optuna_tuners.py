"""Optuna's samplers as tuners (TPE, Gaussian process, NSGA-II) in the real claim path against
PostgreSQL: two workers taking turns propose what one would from the same seed, conditional
hyperparameters are proposed only where their parent's value makes them active, warm-start
seeds are registered as trials and never proposed again, and a worker without PyTorch ends a GP
study with the reason instead of retrying."""

import math

import pytest

from experiments.models import Study, Trial
from experiments.services import studies, trial_claims
from experiments.services.trial_oracle import Outcome
from tests.integration.helpers import saved_study
from tests.lifecycle.test_warm_start_claims import claim as _claim
from tests.lifecycle.test_warm_start_claims import finish as _finish
from workers.tuners import optuna_search
from workers.tuners import oracle as adapter

ORACLES = adapter.KerasTunerOracles()
pytestmark = pytest.mark.django_db
OPTUNA = ["optuna_tpe", "optuna_gp", "optuna_nsga2"]

SPACE = [
    {"name": "units", "type": "int", "min": 4, "max": 64, "step": 4, "sampling": "linear", "parent": None,
     "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 1e-4, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]
CONDITIONAL = [
    {"name": "optimizer", "type": "choice", "values": ["adam", "sgd"], "ordered": False, "parent": None,
     "parent_values": []},
    {"name": "momentum", "type": "float", "min": 0.0, "max": 0.99, "step": None, "sampling": "linear",
     "parent": "optimizer", "parent_values": ["sgd"]},
    {"name": "learning_rate", "type": "float", "min": 1e-4, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]


def objective(values: dict) -> float:
    """Maximised (val_accuracy): best at 32 units and a learning rate of 0.003."""
    return -((values.get("units", 32) - 32) / 60) ** 2 - (math.log10(values["learning_rate"]) + 2.5) ** 2 / 9


def run_two_workers(study, trials: int, score=objective) -> list[dict]:
    """Two workers taking turns: each claims while the other's trial runs, every oracle rebuilt
    from PostgreSQL (as on two hosts), so running trials are part of every proposal."""
    proposals, running = [], []
    for i in range(trials):
        adapter._cache.clear()
        claimed = _claim(study, f"worker{i % 2}-{i}")
        assert claimed.status == "running", claimed.status
        proposals.append(claimed.trial.hyperparameters)
        running.append(claimed.trial)
        if len(running) == 2:
            adapter._cache.clear()
            done = running.pop(0)
            _finish(done, score(done.hyperparameters))
    for trial in running:
        _finish(trial, score(trial.hyperparameters))
    return proposals


@pytest.mark.parametrize("tuner", OPTUNA)
def test_the_same_seed_proposes_the_same_trials_whichever_worker_asks(acme, alice, iris, tuner):
    sequences = []
    for name in ("first", "second"):
        study = studies.study_start(study=saved_study(acme, alice, iris, name=name, tuner=tuner, search_space=SPACE,
                                                      max_trials=14, parallelism=2, seed=11))
        sequences.append(run_two_workers(study, 14))
        study.refresh_from_db()
        assert study.status == Study.Status.COMPLETED, study.message
    assert sequences[0] == sequences[1]
    assert len({tuple(sorted(v.items())) for v in sequences[0]}) == 14  # no configuration twice
    assert all(v["units"] % 4 == 0 and 4 <= v["units"] <= 64 and 1e-4 <= v["learning_rate"] <= 1e-1
               for v in sequences[0])


@pytest.mark.parametrize("tuner", OPTUNA)
def test_conditional_hyperparameters_are_proposed_only_under_their_parents_value(acme, alice, iris, tuner):
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner=tuner, search_space=CONDITIONAL,
                                                  max_trials=14, parallelism=2, seed=3))
    proposals = run_two_workers(study, 14, score=lambda v: objective(v) + (0.1 if v["optimizer"] == "sgd" else 0))
    for values in proposals:
        assert ("momentum" in values) == (values["optimizer"] == "sgd"), values
    assert {v["optimizer"] for v in proposals} == {"adam", "sgd"}


def test_the_tpe_tuner_closes_in_on_the_optimum_after_its_random_start(acme, alice, iris):
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner="optuna_tpe", search_space=SPACE,
                                                  max_trials=30, parallelism=2, initial_random_trials=8, seed=5))
    scores = [objective(v) for v in run_two_workers(study, 30)]
    assert max(scores[8:]) > max(scores[:8]), scores


@pytest.mark.parametrize("tuner", OPTUNA)
def test_warm_start_seeds_run_first_and_are_never_proposed_again(acme, alice, iris, tuner):
    source = saved_study(acme, alice, iris, name="source", search_space=SPACE, max_trials=3)
    seeds = [{"units": 32, "learning_rate": 0.003}, {"units": 8, "learning_rate": 0.05}]
    for number, values in enumerate(seeds, start=1):
        Trial.objects.create(study=source, trial_id=str(number), number=number, status=Trial.Status.COMPLETED,
                             hyperparameters=values, score=objective(values), metrics={})
    study = studies.study_start(study=saved_study(acme, alice, iris, name="seeded", tuner=tuner, search_space=SPACE,
                                                  max_trials=12, parallelism=2, seed_from=[source], top_k=2))
    proposals = run_two_workers(study, 12)
    assert proposals[:2] == seeds
    assert all(values not in seeds for values in proposals[2:])
    study.refresh_from_db()
    assert study.seeds_used == 2 and study.status == Study.Status.COMPLETED


def test_a_gp_study_on_a_worker_without_pytorch_fails_with_the_reason(acme, alice, iris, monkeypatch):
    monkeypatch.setattr(optuna_search, "_torch_installed", lambda: False)
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner="optuna_gp", search_space=SPACE,
                                                  max_trials=6, initial_random_trials=2, parallelism=1))
    adapter._cache.clear()
    assert _claim(study, "a").status == "stopped"
    study.refresh_from_db()
    assert study.status == Study.Status.FAILED
    assert "Optuna's Gaussian-process tuner needs PyTorch on the worker" in study.message
    assert not study.trials.exists()


@pytest.mark.parametrize("tuner", ["optuna_tpe", "optuna_nsga2"])
def test_a_cancelled_study_resumes_and_the_released_trial_runs_again_with_its_values(acme, alice, iris, tuner):
    study = studies.study_start(study=saved_study(acme, alice, iris, tuner=tuner, search_space=SPACE, max_trials=6,
                                                  parallelism=1, seed=9))
    first = _claim(study, "a").trial
    _finish(first, objective(first.hyperparameters))
    running = _claim(study, "b").trial
    studies.study_cancel(study=study)
    trial_claims.finish_trial(trial_pk=running.pk, oracles=ORACLES, outcome=Outcome("released"))
    studies.study_start(study=Study.objects.get(pk=study.pk))
    adapter._cache.clear()
    again = _claim(study, "c").trial
    assert (again.trial_id, again.attempt, again.hyperparameters) == (running.trial_id, 2, running.hyperparameters)
    _finish(again, objective(again.hyperparameters))
    for i in range(4):
        adapter._cache.clear()
        trial = _claim(study, f"d{i}").trial
        _finish(trial, objective(trial.hyperparameters))
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
    assert study.trials.filter(status=Trial.Status.COMPLETED).count() == 6
