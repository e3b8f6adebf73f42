"""Pruning on real workers: a median-pruned random search on breast_cancer (569 rows) stops the
clearly bad trials early without losing the best result, and its decisions are the same
whichever worker process runs the trials (they depend only on rows in PostgreSQL)."""

import signal

import pytest

from experiments.models import Study, Trial, TrialEpoch
from experiments.selectors.studies import study_pruning_savings
from experiments.selectors.trials import study_best_trial
from experiments.services.datasets import dataset_create_bundled
from tests.conftest import wait_for
from tests.integration.helpers import started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

EPOCHS = 6
# Learning rates from 1e-5 (barely learns in 6 epochs: clearly bad) to 1e-1.
SPACE = [
    {"name": "units", "type": "int", "min": 4, "max": 16, "step": 4, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 1e-5, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]
SEARCH = {"hypermodel": "tiny", "search_space": SPACE, "tuner": "random", "objective_metric": "val_loss",
          "objective_direction": "min", "max_trials": 8, "epochs": EPOCHS, "patience": EPOCHS, "batch_size": 32,
          "seed": 1, "parallelism": 1}
MEDIAN = {"pruner": "median", "pruning_startup_trials": 2, "pruning_warmup_epochs": 1, "pruning_min_trials": 2}


def run(team, user, dataset, name: str, **options) -> Study:
    study = started_study(team, user, dataset, name=name, **{**SEARCH, **options})

    def finished():
        study.refresh_from_db()
        return study.status != Study.Status.RUNNING

    wait_for(finished, timeout=300, what=f"study {name} to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    return study


def trials(study) -> dict[int, Trial]:
    return {t.number: t for t in Trial.objects.filter(study=study)}


@pytest.fixture
def breast_cancer(acme, alice):
    return dataset_create_bundled(team=acme, user=alice, bundled_name="breast_cancer")


def test_median_pruning_stops_clearly_bad_trials_early_and_keeps_the_best_score(acme, alice, breast_cancer,
                                                                                 start_worker):
    start_worker("w1")
    plain = run(acme, alice, breast_cancer, "without pruning")
    pruned = run(acme, alice, breast_cancer, "median pruning", **MEDIAN)
    full, cut = trials(plain), trials(pruned)
    assert len(full) == len(cut) == 8
    # Same seed, random search: the same configurations in the same order.
    assert [full[n].hyperparameters for n in sorted(full)] == [cut[n].hyperparameters for n in sorted(cut)]
    stopped = [t for t in cut.values() if t.status == Trial.Status.PRUNED]
    assert stopped, "median pruning stopped no trial"
    best = study_best_trial(study=plain).score
    for trial in stopped:
        assert trial.epochs_trained < EPOCHS
        assert TrialEpoch.objects.filter(trial=trial).count() == trial.epochs_trained
        assert trial.pruning["epoch"] == trial.epochs_trained and trial.pruning["value"] > trial.pruning["threshold"]
        assert trial.checkpoint_id is not None and trial.score is not None
        assert full[trial.number].score > best  # trained in full, it would not have been the best
    assert all(t.epochs_trained == EPOCHS for t in cut.values() if t.status == Trial.Status.COMPLETED)
    assert study_best_trial(study=pruned).score <= best  # minimising val_loss: no worse
    savings = study_pruning_savings(study=pruned)
    assert savings["pruned"] == len(stopped)
    assert savings["device_epochs"] == sum(EPOCHS - t.epochs_trained for t in stopped) > 0
    assert set(pruned.oracle_state["end_order"]) == {t.trial_id for t in cut.values()}


def test_pruning_decisions_are_the_same_whichever_worker_runs_the_trials(acme, alice, breast_cancer, start_worker):
    first = start_worker("w1")
    on_first = run(acme, alice, breast_cancer, "on w1", **MEDIAN)
    first.kill(signal.SIGTERM)
    start_worker("w2")
    on_second = run(acme, alice, breast_cancer, "on w2", **MEDIAN)
    one, two = trials(on_first), trials(on_second)
    assert {t.worker_name.split("@")[0] for t in one.values()} == {"w1"}
    assert {t.worker_name.split("@")[0] for t in two.values()} == {"w2"}
    assert any(t.status == Trial.Status.PRUNED for t in one.values())
    for number, trial in one.items():
        other = two[number]
        assert (trial.status, trial.epochs_trained) == (other.status, other.epochs_trained), number
        decided = {k: v for k, v in trial.pruning.items() if k not in ("value", "threshold")}
        assert decided == {k: v for k, v in other.pruning.items() if k not in ("value", "threshold")}
        if trial.pruning:
            assert other.pruning["value"] == pytest.approx(trial.pruning["value"], rel=1e-6)
            assert other.pruning["threshold"] == pytest.approx(trial.pruning["threshold"], rel=1e-6)


def test_median_pruning_works_with_optuna_tpe_and_the_tuner_is_told_the_pruned_score(acme, alice, breast_cancer,
                                                                                     start_worker):
    start_worker("w1")
    # Seed 3: TPE's random start draws a learning rate near 1e-5 (with seed 1 it draws none that
    # bad, and then nothing is clearly behind).
    study = run(acme, alice, breast_cancer, "tpe with pruning", tuner="optuna_tpe", initial_random_trials=6, seed=3,
                **MEDIAN)
    found = trials(study)
    assert len(found) == SEARCH["max_trials"]
    stopped = [t for t in found.values() if t.status == Trial.Status.PRUNED]
    assert stopped, "median pruning stopped no trial"
    for trial in stopped:
        assert trial.epochs_trained < EPOCHS and trial.kt_state["score"] == trial.score  # TPE learns from it
