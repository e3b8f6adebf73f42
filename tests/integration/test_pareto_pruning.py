"""Pareto pruning on real workers: a two-objective random search (validation loss and parameter count) on
breast_cancer stops dominated trials early, never one that trained in full would be on the final front, and decides
alike whichever worker runs the trials (the points are rows in PostgreSQL)."""

import signal

import pytest

from experiments.models import Trial, TrialEpoch
from experiments.tuning.objectives import pareto_front
from tests.integration.test_pruning import SEARCH, run, trials

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

TWO_OBJECTIVES = {"extra_objectives": [{"metric": "params", "direction": "min"}], "pruner": "pareto",
                  "pruning_startup_trials": 2, "pruning_min_trials": 2, "pruning_min_epochs": 1,
                  "pruning_reduction_factor": 3}
SPACE = [
    {"name": "units", "type": "int", "min": 4, "max": 32, "step": 4, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 1e-5, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]


@pytest.fixture
def breast_cancer(acme, alice):
    from experiments.services.datasets import dataset_create_bundled

    return dataset_create_bundled(team=acme, user=alice, bundled_name="breast_cancer")


def test_pareto_pruning_stops_dominated_trials_keeps_the_front_and_decides_alike_on_two_workers(
        acme, alice, breast_cancer, start_worker):
    first = start_worker("w1")
    options = {"search_space": SPACE, "seed": 2}
    plain = trials(run(acme, alice, breast_cancer, "two objectives, no pruning",
                       extra_objectives=TWO_OBJECTIVES["extra_objectives"], **options))
    on_first = trials(run(acme, alice, breast_cancer, "pareto on w1", **TWO_OBJECTIVES, **options))
    first.kill(signal.SIGTERM)
    start_worker("w2")
    on_second = trials(run(acme, alice, breast_cancer, "pareto on w2", **TWO_OBJECTIVES, **options))

    stopped = [t for t in on_first.values() if t.status == Trial.Status.PRUNED]
    assert stopped, "the Pareto pruner stopped no trial"
    numbers = sorted(plain)
    front = {numbers[i] for i in pareto_front([[plain[n].score, plain[n].metrics["params"]] for n in numbers],
                                              ["min", "min"])}
    assert not front & {t.number for t in stopped}, "a trial of the full-training front was pruned"
    for trial in stopped:
        assert trial.epochs_trained < SEARCH["epochs"] and trial.pruning["pruner"] == "pareto"
        assert trial.pruning["threshold"] >= 1  # dominated by at least one finished trial at its rung
        assert TrialEpoch.objects.filter(trial=trial, point__isnull=False).count() == trial.epochs_trained
    for number, trial in on_first.items():
        other = on_second[number]
        assert trial.hyperparameters == other.hyperparameters
        assert (trial.status, trial.epochs_trained) == (other.status, other.epochs_trained), number
        assert {k: v for k, v in trial.pruning.items() if k != "value"} == {
            k: v for k, v in other.pruning.items() if k != "value"}
