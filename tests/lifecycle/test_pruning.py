"""Pruning decided from the rows in PostgreSQL: the per-epoch record call stores each epoch's
best-so-far value and answers whether the trial goes on; a pruned trial is finished with its
own state, told to the tuner as a completed result, and never counts as a failure."""

import pytest

from experiments.models import Study, Trial, TrialEpoch
from experiments.services import studies, trial_claims, trial_epochs, trial_oracle
from experiments.services.trial_epochs import StudyPruning
from experiments.services.trial_oracle import Claimant, Outcome
from workers.tuners.oracle import KerasTunerOracles

ORACLES = KerasTunerOracles()
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
MEDIAN = {"pruner": "median", "pruning_startup_trials": 2, "pruning_warmup_epochs": 1, "pruning_min_trials": 2,
          "objective_metric": "val_loss", "objective_direction": "min", "epochs": 5, "parallelism": 1,
          "max_trials": 20}


@pytest.fixture
def pruning_study(make_study):
    def make(**options):
        return studies.study_start(study=make_study(**{**MEDIAN, **options}))

    return make


class Runner:
    """Drives trials through claim, epoch reports and finish, as a worker does, without training."""

    def __init__(self, study: Study):
        self.study = Study.objects.get(pk=study.pk)
        self.pruning = StudyPruning.for_study(self.study)
        self.claims = 0

    def claim(self) -> Trial:
        self.claims += 1
        claim = trial_claims.claim_trial(study_id=self.study.pk, oracles=ORACLES,
                                       claimant=Claimant(tuner_id=f"t{self.claims}", worker_host="h"))
        assert claim.status == "running", claim.status
        return claim.trial

    def report(self, trial: Trial, losses: list[float], execution: int = 0):
        """Each loss as one epoch's val_loss until the trial is told to stop; the last verdict."""
        verdict = None
        for epoch, loss in enumerate(losses):
            verdict = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=execution, epoch=epoch,
                                                    metrics={"val_loss": loss, "loss": loss}, pruning=self.pruning)
            if not verdict:
                break
        return verdict

    def run(self, losses: list[float]) -> Trial:
        """One trial to its end: pruned when the pruner says so, else completed."""
        trial = self.claim()
        verdict = self.report(trial, losses)
        ran = TrialEpoch.objects.filter(trial=trial).count()
        best = min(losses[:ran])
        status = "pruned" if verdict.pruned else "completed"
        trial_claims.finish_trial(trial_pk=trial.pk, oracles=ORACLES, outcome=Outcome(
            status, score=best, best_step=losses.index(best), metrics={"val_loss": best}, epochs_trained=ran,
            pruning=verdict.pruned or {}))
        trial.refresh_from_db()
        return trial


GOOD = [0.9, 0.6, 0.4, 0.3, 0.25]


def test_each_epoch_row_keeps_the_best_value_so_far(pruning_study):
    runner = Runner(pruning_study())
    trial = runner.run([0.9, 0.5, 0.7, 0.4, 0.6])
    assert list(TrialEpoch.objects.filter(trial=trial).values_list("best_objective", flat=True)) == [
        0.9, 0.5, 0.5, 0.4, 0.4]


def test_a_study_without_a_pruner_records_no_best_values_and_never_prunes(make_study):
    study = studies.study_start(study=make_study(**{**MEDIAN, "pruner": "none"}))
    runner = Runner(study)
    assert runner.pruning is None
    for _ in range(3):
        runner.run(GOOD)
    bad = runner.run([5.0] * 5)
    assert bad.status == Trial.Status.COMPLETED
    assert not TrialEpoch.objects.filter(trial__study=study, best_objective__isnull=False).exists()


def test_a_trial_behind_the_median_of_finished_trials_is_pruned_after_the_warmup(pruning_study):
    runner = Runner(pruning_study())
    runner.run(GOOD), runner.run([1.0, 0.7, 0.5, 0.35, 0.3])
    trial = runner.claim()
    first = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=0, metrics={"val_loss": 3.0},
                                          pruning=runner.pruning)
    assert first and first.pruned is None  # epoch 1 is the warm-up
    second = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=1, metrics={"val_loss": 2.0},
                                           pruning=runner.pruning)
    assert not second
    assert second.pruned == {"prune": True, "reason": "pruned", "pruner": "median", "execution": 0, "epoch": 2,
                             "value": 2.0, "threshold": pytest.approx(0.65), "compared": 2, "rung": None}


def test_a_trial_at_or_ahead_of_the_median_runs_all_its_epochs(pruning_study):
    runner = Runner(pruning_study())
    runner.run(GOOD), runner.run([1.0, 0.7, 0.5, 0.35, 0.3])
    trial = runner.run([0.8, 0.55, 0.45, 0.3, 0.2])
    assert trial.status == Trial.Status.COMPLETED and trial.epochs_trained == 5


def test_nothing_is_pruned_before_the_startup_trials_completed(pruning_study):
    runner = Runner(pruning_study(pruning_startup_trials=3, pruning_min_trials=1))
    runner.run(GOOD), runner.run(GOOD)
    assert runner.run([5.0] * 5).status == Trial.Status.COMPLETED  # only 2 completed before it
    assert runner.run([5.0] * 5).status == Trial.Status.PRUNED


def test_running_trials_do_not_count_towards_the_bar(pruning_study):
    runner = Runner(pruning_study(parallelism=2, pruning_startup_trials=1, pruning_min_trials=2))
    runner.run(GOOD)
    other = runner.claim()
    runner.report(other, [0.1, 0.1, 0.1])  # excellent, but still running: not a reference
    trial = runner.claim()
    assert runner.report(trial, [3.0, 3.0, 3.0, 3.0])  # only one finished trial: too few to judge


def test_pruned_trials_count_towards_the_bar_of_later_trials(pruning_study):
    runner = Runner(pruning_study(pruning_startup_trials=1, pruning_min_trials=2))
    runner.run(GOOD), runner.run(GOOD)
    pruned = runner.run([0.95, 0.8, 0.7, 0.6, 0.5])
    assert pruned.status == Trial.Status.PRUNED and pruned.epochs_trained == 2
    # Two completed and one pruned trial reached epoch 2: the bar is set by all three.
    later = runner.claim()
    verdict = runner.report(later, [0.95, 0.9])
    assert verdict.pruned["compared"] == 3


def test_a_pruned_trial_is_a_result_for_the_tuner_and_not_a_failure(pruning_study):
    study = pruning_study(pruning_startup_trials=1, pruning_min_trials=1, max_consecutive_failed_trials=1)
    runner = Runner(study)
    runner.run(GOOD)
    pruned = [runner.run([4.0, 4.0, 4.0, 4.0, 4.0]) for _ in range(3)]
    assert [t.status for t in pruned] == [Trial.Status.PRUNED] * 3
    study.refresh_from_db()
    assert study.status == Study.Status.RUNNING  # three in a row, with a failure limit of one
    trial = pruned[0]
    assert trial.score == 4.0 and trial.best_epoch == 1 and trial.epochs_trained == 2
    assert trial.pruning["epoch"] == 2 and trial.pruning["threshold"] == pytest.approx(0.6)
    assert trial.kt_state["status"] == "COMPLETED" and trial.kt_state["score"] == 4.0
    assert trial.id in [t.id for t in Trial.objects.filter(study=study, status="pruned")]


def test_the_last_epoch_is_never_judged(pruning_study):
    runner = Runner(pruning_study(epochs=3, pruning_startup_trials=1, pruning_min_trials=1))
    runner.run([0.5, 0.4, 0.3])
    trial = runner.claim()
    runner.report(trial, [0.5, 0.4])
    last = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=2, metrics={"val_loss": 9.0},
                                         pruning=runner.pruning)
    assert last and last.pruned is None


def test_each_execution_is_compared_with_the_same_execution_of_finished_trials(pruning_study):
    runner = Runner(pruning_study(executions_per_trial=2, parallelism=2, pruning_startup_trials=1,
                                  pruning_min_trials=1))
    finished = runner.claim()
    runner.report(finished, [0.5] * 5, execution=0)
    runner.report(finished, [0.9] * 5, execution=1)
    trial_claims.finish_trial(trial_pk=finished.pk, oracles=ORACLES,
                            outcome=Outcome("completed", score=0.7, best_step=0, epochs_trained=10))
    trial = runner.claim()
    assert runner.report(trial, [0.6] * 5, execution=0).pruned is not None  # 0.6 > 0.5 in execution 1
    trial = runner.claim()
    assert runner.report(trial, [0.6] * 4, execution=1)  # 0.6 < 0.9 in execution 2


def test_successive_halving_judges_only_at_its_rungs(pruning_study):
    runner = Runner(pruning_study(pruner="successive_halving", pruning_min_epochs=1, pruning_reduction_factor=2,
                                  pruning_startup_trials=1, pruning_min_trials=1, epochs=6))
    runner.run([0.5, 0.4, 0.3, 0.2, 0.2, 0.2])
    trial = runner.claim()
    verdict = runner.report(trial, [0.45, 0.5, 0.5, 0.5, 0.5])  # best at epoch 1, behind at epoch 2
    assert verdict.pruned["rung"] == 1 and verdict.pruned["epoch"] == 2
    assert TrialEpoch.objects.filter(trial=trial).count() == 2


def test_one_epoch_report_of_a_pruning_study_adds_one_query(pruning_study, django_assert_num_queries):
    runner = Runner(pruning_study(pruning_startup_trials=1, pruning_min_trials=1))
    runner.run(GOOD), runner.run(GOOD)
    trial = runner.claim()
    runner.report(trial, [0.9])
    # heartbeat UPDATE, one SELECT (own previous best and the finished trials' at this epoch),
    # the INSERT, and no count: the completed trials at this epoch already pass the startup rule.
    with django_assert_num_queries(3):
        trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=1,
                                                          metrics={"val_loss": 0.5}, pruning=runner.pruning)
    with django_assert_num_queries(1):  # without pruning: heartbeat and row in one statement
        assert trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=2, metrics={"val_loss": 0.5})
    with django_assert_num_queries(1):  # a re-reported epoch replaces its row
        assert trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=2, metrics={"val_loss": 0.4})
    assert TrialEpoch.objects.get(trial=trial, execution=0, epoch=2).metrics == {"val_loss": 0.4}
    studies.study_cancel(study=runner.study)
    assert not trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=3, metrics={"val_loss": 0.3})
    assert not TrialEpoch.objects.filter(trial=trial, epoch=3).exists()


def test_a_cancelled_study_stops_the_trial_without_a_pruning_decision(pruning_study):
    study = pruning_study(pruning_startup_trials=0, pruning_min_trials=1)
    runner = Runner(study)
    trial = runner.claim()
    studies.study_cancel(study=study)
    verdict = trial_epochs.trial_record_epoch(trial_pk=trial.pk, execution=0, epoch=1, metrics={"val_loss": 1.0},
                                            pruning=runner.pruning)
    assert not verdict and verdict.pruned is None
    assert not TrialEpoch.objects.filter(trial=trial).exists()


def test_the_bayesian_tuner_learns_from_pruned_trials(pruning_study):
    from workers.tuners.oracle import load_oracle

    study = pruning_study(tuner="bayesian", initial_random_trials=3, pruning_startup_trials=1, pruning_min_trials=1)
    runner = Runner(study)
    runner.run(GOOD)
    pruned = [runner.run([4.0 + i] * 5) for i in range(2)]
    assert [t.status for t in pruned] == [Trial.Status.PRUNED] * 2
    study = Study.objects.get(pk=study.pk)
    oracle = load_oracle(study, trial_oracle.trial_rows_for_oracle(study))
    for trial in pruned:
        kt_trial = oracle.trials[trial.trial_id]
        assert kt_trial.status == "COMPLETED" and kt_trial.score == trial.score
    _, scores = oracle._vectorize_trials()
    assert sorted(scores)[-2:] == [4.0, 5.0]  # the Gaussian process is fitted on them (scores to minimise)
    following = runner.claim()  # past the initial random trials: proposed by the Gaussian process
    assert following.number == 4


def test_grid_search_moves_on_after_a_pruned_trial(pruning_study):
    space = [{"name": "units", "type": "choice", "values": [4, 8, 16], "ordered": True, "parent": None,
              "parent_values": []}]
    study = pruning_study(tuner="grid", search_space=space, pruning_startup_trials=1, pruning_min_trials=1)
    runner = Runner(study)
    first = runner.run(GOOD)
    second = runner.run([9.0] * 5)
    third = runner.run(GOOD)
    assert [t.status for t in (first, second, third)] == ["completed", "pruned", "completed"]
    assert sorted(t.hyperparameters["units"] for t in (first, second, third)) == [4, 8, 16]  # no retry
    last = trial_claims.claim_trial(study_id=study.pk, oracles=ORACLES,
                                    claimant=Claimant(tuner_id="z", worker_host="h"))
    assert last.status == "stopped"  # the grid is done
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
