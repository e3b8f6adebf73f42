"""Model-based Hyperband on real workers: the same seed gives the same sequence of configurations and brackets
whichever worker runs the study (its proposals depend only on the seed and the trial rows; that they follow the
model is tests/lifecycle/test_model_based_hyperband.py)."""

import signal

import pytest

from tests.integration.test_pruning import SPACE, run, trials

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

HYPERBAND = {"search_space": SPACE, "epochs": 3, "patience": 3, "max_trials": 10, "seed": 5}


def _sequence(study) -> list[tuple]:
    return [(n, sorted(t.hyperparameters.items())) for n, t in sorted(trials(study).items())]


def test_the_same_seed_gives_the_same_sequence_on_two_workers(acme, alice, start_worker):
    from experiments.services.datasets import dataset_create_bundled

    breast_cancer = dataset_create_bundled(team=acme, user=alice, bundled_name="breast_cancer")
    first = start_worker("w1")
    on_first = run(acme, alice, breast_cancer, "bohb on w1", tuner="hyperband_tpe", **HYPERBAND)
    first.kill(signal.SIGTERM)
    start_worker("w2")
    on_second = run(acme, alice, breast_cancer, "bohb on w2", tuner="hyperband_tpe", **HYPERBAND)
    assert {t.worker_name.split("@")[0] for t in trials(on_second).values()} == {"w2"}
    assert _sequence(on_first) == _sequence(on_second)
    assert [t.score for _, t in sorted(trials(on_first).items())] == pytest.approx(
        [t.score for _, t in sorted(trials(on_second).items())], rel=1e-5)
