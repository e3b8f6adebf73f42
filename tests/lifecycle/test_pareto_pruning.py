"""Pareto pruning decided from the rows in PostgreSQL: each epoch of a two-objective study stores its point (the
first objective's best so far, the parameter count the worker knew before training) and a finished trial's points
become the references later trials are judged by at the rungs."""

import pytest

from experiments.models import PruningReference, Trial, TrialEpoch
from experiments.services import studies, trial_claims, trial_epochs
from experiments.services.trial_oracle import Outcome
from experiments.tuning.pruners import explain
from tests.lifecycle.test_pruning import MEDIAN, ORACLES, Runner

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
PARETO = {**MEDIAN, "pruner": "pareto", "tuner": "random", "pruning_min_epochs": 1, "pruning_reduction_factor": 3,
          "pruning_startup_trials": 1, "pruning_min_trials": 1, "epochs": 9,
          "extra_objectives": [{"metric": "params", "direction": "min"}],
          "constraints": [{"metric": "params", "op": "<=", "value": 5000.0}]}


def _run(runner: Runner, losses: list[float], params: float):
    trial = runner.claim()
    verdict = None
    for epoch, loss in enumerate(losses):
        verdict = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=epoch,
                                                  metrics={"val_loss": loss}, pruning=runner.pruning,
                                                  known={"params": params})
        if not verdict:
            break
    ran = TrialEpoch.objects.filter(trial=trial).count()
    best = min(losses[:ran])
    trial_claims.finish_trial(trial_pk=trial.pk, oracles=ORACLES, outcome=Outcome(
        "pruned" if verdict.pruned else "completed", score=best, best_step=0, epochs_trained=ran,
        metrics={"val_loss": best, "params": params}, pruning=verdict.pruned or {}))
    trial.refresh_from_db()
    return trial, verdict


def test_each_epoch_keeps_its_point_and_a_finished_trial_becomes_a_reference(make_study):
    runner = Runner(studies.study_start(study=make_study(**PARETO)))
    trial, _ = _run(runner, [0.9, 0.5, 0.7], params=1200.0)
    points = list(TrialEpoch.objects.filter(trial=trial).values_list("point", flat=True))
    assert points == [{"values": [0.9, 1200.0], "violation": 0.0}, {"values": [0.5, 1200.0], "violation": 0.0},
                      {"values": [0.5, 1200.0], "violation": 0.0}]
    assert PruningReference.objects.filter(trial=trial, point__isnull=False).count() == 3


def test_a_dominated_trial_is_pruned_at_a_rung_and_a_smaller_worse_one_goes_on(make_study):
    runner = Runner(studies.study_start(study=make_study(**PARETO)))
    _run(runner, [0.5] * 9, params=1000.0)
    _run(runner, [0.4] * 9, params=2000.0)
    small, kept = _run(runner, [0.8] * 9, params=100.0)  # worse loss, smaller model: on the front
    assert small.status == "completed" and small.epochs_trained == 9
    big, verdict = _run(runner, [0.6] * 9, params=3000.0)  # worse and larger than both first trials
    assert big.status == "pruned" and big.epochs_trained == 1  # the first rung
    assert verdict.pruned["pruner"] == "pareto" and verdict.pruned["threshold"] == 2.0
    assert "2 of the 3 finished trials at that rung dominated it" in explain(big.pruning, "val_loss")


def test_a_trial_over_a_watched_constraint_is_pruned_however_good_its_loss(make_study):
    runner = Runner(studies.study_start(study=make_study(**PARETO)))
    _run(runner, [0.5] * 9, params=1000.0)
    _run(runner, [0.6] * 9, params=900.0)
    _run(runner, [0.7] * 9, params=800.0)
    over, _ = _run(runner, [0.1] * 9, params=9000.0)  # params <= 5000 is broken from the first epoch
    assert over.status == "pruned" and over.epochs_trained == 1


def test_one_epoch_report_at_a_rung_reads_the_previous_point_and_the_references(make_study,
                                                                                 django_assert_num_queries):
    runner = Runner(studies.study_start(study=make_study(**PARETO)))
    _run(runner, [0.5] * 9, params=1000.0)
    _run(runner, [0.4] * 9, params=2000.0)
    trial = runner.claim()
    trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=0, metrics={"val_loss": 0.45},
                                    pruning=runner.pruning, known={"params": 10.0})
    # heartbeat UPDATE, own previous best, the references at epoch 3 (a rung), the INSERT.
    trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=1, metrics={"val_loss": 0.45},
                                    pruning=runner.pruning, known={"params": 10.0})
    with django_assert_num_queries(4):
        assert trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=2, metrics={"val_loss": 0.45},
                                               pruning=runner.pruning, known={"params": 10.0})
    studies.study_cancel(study=runner.study)


def test_a_preempted_trials_next_attempt_carries_its_points(make_study):
    runner = Runner(studies.study_start(study=make_study(**PARETO)))
    trial = runner.claim()
    for epoch in range(2):
        trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=epoch, metrics={"val_loss": 0.5},
                                        pruning=runner.pruning, known={"params": 300.0})
    retry = Trial.objects.create(study=trial.study, trial_id=trial.trial_id, number=trial.number + 1, attempt=2,
                                 status=Trial.Status.RUNNING, hyperparameters=trial.hyperparameters)
    trial_epochs.trial_epochs_carry(trial=retry, resume={"epoch": 2})
    assert list(retry.epochs.order_by("epoch").values_list("point", flat=True)) == [
        {"values": [0.5, 300.0], "violation": 0.0}] * 2
