"""Parallel trials across worker processes: every tuner, no duplicates, row-locked claims."""

import pytest

from experiments.models import Study, Trial
from tests.conftest import wait_for
from tests.integration.helpers import digits, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

TWO_UNITS_TWO_RATES = [
    {"name": "units", "type": "choice", "values": [4, 8], "ordered": True, "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "choice", "values": [0.01, 0.1], "ordered": True, "parent": None,
     "parent_values": []},
]


def finished(study) -> bool:
    study.refresh_from_db()
    return study.status in (Study.Status.COMPLETED, Study.Status.FAILED, Study.Status.CANCELLED)


def overlapping(trials) -> bool:
    spans = sorted((t.started, t.finished) for t in trials)
    return any(b_start < a_end for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))


def assert_no_duplicates(study) -> list[Trial]:
    completed = list(Trial.objects.filter(study=study, status=Trial.Status.COMPLETED))
    assert len({t.trial_id for t in completed}) == len(completed), "a trial id completed twice"
    return completed


def test_two_workers_run_a_study_with_parallelism_two(acme, alice, start_worker):
    start_worker("w1"), start_worker("w2")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=6, epochs=2,
                          parallelism=2)
    wait_for(lambda: finished(study), timeout=240, what="the study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    completed = assert_no_duplicates(study)
    assert len(completed) == 6
    assert overlapping(completed), "trials never ran at the same time"
    assert len({t.worker_name for t in completed}) == 2, "both workers should have served trials"


@pytest.mark.parametrize("tuner", ["random", "bayesian", "hyperband", "grid", "optuna_tpe"])
def test_each_tuner_runs_in_parallel(acme, alice, start_worker, tuner):
    start_worker("w1", concurrency=2)
    options = {"max_trials": 5, "epochs": 2}
    if tuner == "grid":
        options = {"max_trials": 10, "epochs": 2, "search_space": TWO_UNITS_TWO_RATES}
    if tuner == "hyperband":
        options = {"max_trials": 12, "epochs": 4}
    study = started_study(acme, alice, digits(acme, alice), tuner=tuner, parallelism=2, **options)
    wait_for(lambda: finished(study), timeout=300, what=f"the {tuner} study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    completed = assert_no_duplicates(study)
    trials = Trial.objects.filter(study=study)
    assert not trials.filter(status=Trial.Status.RUNNING).exists()
    if tuner in ("random", "bayesian", "optuna_tpe"):
        assert len(completed) == 5
    if tuner == "grid":
        combos = {(t.hyperparameters["units"], t.hyperparameters["learning_rate"]) for t in completed}
        assert combos == {(4, 0.01), (4, 0.1), (8, 0.01), (8, 0.1)}  # the whole grid, each once
    if tuner == "hyperband":
        assert len(completed) == 12  # brackets repeat until max_trials is spent
        continued = [t for t in completed if t.hyperparameters.get("tuner/trial_id")]
        assert continued, "no Hyperband round continued an earlier trial"
        for trial in continued:
            parent = next(p for p in completed if p.trial_id == trial.hyperparameters["tuner/trial_id"])
            assert parent.checkpoint_id is not None
            # The absolute best epoch: tuner/initial_epoch + best step + 1.
            assert trial.best_epoch > trial.hyperparameters["tuner/initial_epoch"]
            assert trial.best_epoch <= trial.hyperparameters["tuner/epochs"]
