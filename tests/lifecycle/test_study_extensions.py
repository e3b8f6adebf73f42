"""Extending an ended study: more trials, more epochs or another tuner, its numbering and history kept, every trial
so far told to the new tuner; a refused extension changes nothing."""

import pytest

from experiments.models import AuditEvent, Study, Trial
from experiments.services import studies
from experiments.services.study_extensions import ExtensionRefused, study_extend
from experiments.services.trial_oracle import trial_rows_for_oracle
from tests.lifecycle.test_pruning import ORACLES, Runner

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
PLAIN = {"tuner": "random", "pruner": "none", "objective_metric": "val_loss", "objective_direction": "min",
         "epochs": 3, "parallelism": 1, "max_trials": 3}


def _completed(make_study, **options) -> Study:
    study = studies.study_start(study=make_study(**{**PLAIN, **options}))
    runner = Runner(study)
    for loss in (0.9, 0.5, 0.7):
        runner.run([loss + 0.2, loss + 0.1, loss])
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED, study.message
    return study


def test_an_extended_study_numbers_on_and_its_new_tuner_is_told_every_trial(make_study, alice):
    study = _completed(make_study)
    extended = study_extend(study=study, user=alice, max_trials=5, epochs=4, tuner="optuna_tpe")
    assert extended.status == Study.Status.RUNNING and (extended.tuner, extended.max_trials, extended.epochs) == (
        "optuna_tpe", 5, 4)
    assert extended.failures_counted_from == 3  # failures before the extension no longer count
    assert [(s["first_trial"], s["tuner"], s["max_trials"], s["epochs"], s["by"]) for s in extended.segments] == [
        (1, "random", 3, 3, ""), (4, "optuna_tpe", 5, 4, "alice")]
    oracle = ORACLES.load(extended, trial_rows_for_oracle(extended))
    assert type(oracle).__name__ == "OptunaOracle"
    assert sorted(t.score for t in oracle.trials.values()) == [0.5, 0.7, 0.9]  # the new tuner sees them all
    runner = Runner(extended)
    trial = runner.run([0.6, 0.5, 0.45, 0.4])
    assert trial.number == 4 and trial.kt_state["status"] == "COMPLETED"
    runner.run([0.6, 0.5, 0.45, 0.4])
    extended.refresh_from_db()
    assert extended.status == Study.Status.COMPLETED
    assert Trial.objects.filter(study=study).count() == 5
    event = AuditEvent.objects.filter(verb="study.extend").get()
    assert event.changes["tuner"] == ["random", "optuna_tpe"] and event.changes["max_trials"] == [3, 5]


def test_a_study_extended_to_model_based_hyperband_builds_its_brackets_around_the_earlier_trials(make_study, alice):
    study = _completed(make_study)
    extended = study_extend(study=study, user=alice, max_trials=8, tuner="hyperband_tpe")
    trial = Runner(extended).claim()
    assert trial.number == 4 and "tuner/epochs" in trial.hyperparameters
    oracle = ORACLES.load(extended, trial_rows_for_oracle(extended))
    assert len(oracle.trials) == 4 and oracle._brackets


@pytest.mark.parametrize(("changes", "field", "message"), [
    ({"max_trials": 3}, "max_trials", "raise max trials above 3"),
    ({"max_trials": 6, "epochs": 2}, "epochs", "Epochs can only be raised (from 3)"),
    ({"max_trials": 6, "tuner": "bayesian"}, "tuner", "rank trials by one score"),
    ({"max_trials": 6, "stop_device_hours": 1e-9}, "stop_device_hours", "Raise the device-hour budget to run it on."),
])
def test_an_extension_that_breaks_a_rule_is_refused_and_changes_nothing(make_study, alice, changes, field, message):
    study = _completed(make_study, extra_objectives=[{"metric": "params", "direction": "min"}])
    before = Study.objects.filter(pk=study.pk).values().get()
    with pytest.raises(ExtensionRefused) as refused:
        study_extend(study=study, user=alice, **changes)
    assert message in refused.value.errors[field]
    assert Study.objects.filter(pk=study.pk).values().get() == before


def test_a_pruning_study_switched_to_hyperband_is_refused_on_the_tuner(make_study, alice):
    study = _completed(make_study, pruner="median", epochs=4)
    with pytest.raises(ExtensionRefused) as refused:
        study_extend(study=study, user=alice, max_trials=6, tuner="hyperband_tpe")
    assert refused.value.errors["tuner"].startswith("This study prunes with median. Hyperband already stops")


def test_a_running_study_is_not_extended(make_study, alice):
    study = studies.study_start(study=make_study(**PLAIN))
    with pytest.raises(studies.StudyError, match="Only a completed, cancelled or failed study can be extended"):
        study_extend(study=study, user=alice, max_trials=10)
    studies.study_cancel(study=study)


def test_more_trials_for_the_same_tuner_keep_its_whole_state(make_study, alice):
    study = _completed(make_study, tuner="optuna_nsga2", extra_objectives=[{"metric": "params", "direction": "min"}])
    kept = study.oracle_state
    extended = study_extend(study=study, user=alice, max_trials=6)
    assert extended.oracle_state == kept and "optuna" in kept  # NSGA-II's generations go on


def test_a_stopping_rule_met_before_the_extension_does_not_end_it_again(make_study, alice):
    study = studies.study_start(study=make_study(**{**PLAIN, "stop_target": 0.6}))
    Runner(study).run([0.9, 0.8, 0.7])
    Runner(study).run([0.7, 0.6, 0.5])  # reaches the target: the study ends
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED and study.message.startswith("Stopped early")
    extended = study_extend(study=study, user=alice, max_trials=6)
    Runner(extended).run([0.9, 0.8, 0.7])  # no better than the target: the extension runs on
    extended.refresh_from_db()
    assert extended.status == Study.Status.RUNNING
    Runner(extended).run([0.7, 0.6, 0.55])  # a trial of the new segment reaches it
    extended.refresh_from_db()
    assert extended.status == Study.Status.COMPLETED and "at trial 4" in extended.message


def test_what_pruning_saved_counts_each_pruned_trial_against_its_own_segments_epochs(make_study, alice):
    from experiments.selectors.studies import study_pruning_savings

    study = make_study(**{**PLAIN, "pruner": "median", "epochs": 4})
    Trial.objects.create(study=study, trial_id="1", number=1, status=Trial.Status.PRUNED, epochs_trained=1)
    segments = [{"first_trial": 1, "epochs": 4}, {"first_trial": 2, "epochs": 6}]
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, epochs=6, segments=segments)
    Trial.objects.create(study=study, trial_id="2", number=2, status=Trial.Status.PRUNED, epochs_trained=2)
    study.refresh_from_db()
    assert study_pruning_savings(study=study)["epochs"] == (4 - 1) + (6 - 2)
