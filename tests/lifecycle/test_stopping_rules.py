"""Stopping rules in the trial lifecycle, against PostgreSQL: a result that reaches the target or
ends a plateau completes the study under its lock, with the reason, one notification, no claim
or wake-up after it, and running trials stopped as a cancel stops them (their epochs kept)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import EventKind, NotificationEvent, Study, Trial, TrialEpoch
from experiments.services import studies, trial_claims, trial_epochs
from experiments.services.trial_claims import STOPPED_EARLY_REASON
from experiments.services.trial_oracle import Claimant, Outcome
from tests.lifecycle.test_notification_events import opt_in
from workers.tuners.oracle import KerasTunerOracles

ORACLES = KerasTunerOracles()
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
MAXIMISE = {"objective_metric": "val_accuracy", "objective_direction": "max", "parallelism": 1, "max_trials": 8}


def claim(study, tuner="w"):
    return trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=tuner, worker_host="h"),
                                  oracles=ORACLES)


def finish(trial, score, status="completed", next_claimant=None):
    outcome = Outcome(status, score=score, best_step=0, metrics={"val_accuracy": score})
    return trial_claims.finish_trial(trial_pk=trial.pk, outcome=outcome, oracles=ORACLES, next_claimant=next_claimant)


def run(study, scores, statuses=None):
    """Trials one after another, each finisher claiming the next as a worker does, until the
    scores run out or the study stops handing out trials; the study as it ends."""
    trial = claim(study).trial
    for i, score in enumerate(scores):
        status = (statuses or {}).get(i + 1, "completed")
        done = finish(trial, score, status, next_claimant=Claimant(tuner_id=f"w{i}", worker_host="h"))
        if done.claim is None or done.claim.status != "running":
            break
        trial = done.claim.trial
    return Study.objects.get(pk=study.pk)


@pytest.fixture
def stopping_study(make_study):
    def make(**options):
        return studies.study_start(study=make_study(**{**MAXIMISE, **options}))

    return make


def test_a_result_that_reaches_the_target_completes_the_study_with_the_reason(stopping_study):
    study = run(stopping_study(stop_target=0.95), [0.5, 0.7, 0.97, 0.99, 0.99])
    assert study.status == Study.Status.COMPLETED and study.finished is not None
    assert study.message == "Stopped early: val_accuracy reached 0.97 (target 0.95) at trial 3."
    assert Trial.objects.filter(study=study).count() == 3  # no trial claimed after it
    assert claim(study).status == "stopped"  # nor by a wake-up still in the broker


def test_a_minimised_objective_stops_at_or_below_its_target(stopping_study):
    study = run(stopping_study(objective_metric="val_loss", objective_direction="min", stop_target=0.2),
                [0.6, 0.4, 0.2, 0.1])
    assert study.message == "Stopped early: val_loss reached 0.2 (target 0.2) at trial 3."


def test_the_best_stalling_for_patience_trials_stops_the_study(stopping_study):
    # Trial 2 sets the bar at 0.8; 0.805 and 0.809 do not beat it by more than 0.01.
    study = run(stopping_study(stop_patience=2, stop_min_delta=0.01), [0.5, 0.8, 0.805, 0.809, 0.95])
    assert study.status == Study.Status.COMPLETED
    assert study.message == ("Stopped early: no improvement over 0.8 by more than 0.01 in the last 2 trials "
                             "(best val_accuracy 0.809 at trial 4).")
    assert Trial.objects.filter(study=study).count() == 4


def test_pruned_trials_count_towards_the_plateau_and_failed_ones_do_not(stopping_study, make_study):
    study = run(stopping_study(stop_patience=2), [0.8, 0.6, 0.7], statuses={2: "pruned"})
    assert study.message.startswith("Stopped early: no improvement over 0.8 in the last 2 trials")
    other = studies.study_start(study=make_study(**{**MAXIMISE, "stop_patience": 2, "name": "with failures"}))
    trial = claim(other).trial
    finish(trial, 0.8)
    for _ in range(2):
        trial = claim(other).trial
        trial_claims.finish_trial(trial_pk=trial.pk, oracles=ORACLES, outcome=Outcome("failed", error="boom"))
    assert Study.objects.get(pk=other.pk).status == Study.Status.RUNNING


def test_a_study_whose_rules_are_not_met_runs_its_whole_budget(stopping_study):
    study = run(stopping_study(max_trials=4, stop_target=0.99, stop_patience=2), [0.5, 0.6, 0.55, 0.7])
    assert study.status == Study.Status.COMPLETED and study.message == ""
    assert Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).count() == 4


def test_a_target_reached_by_the_last_trial_of_the_budget_is_an_ordinary_completion(stopping_study):
    study = run(stopping_study(max_trials=2, stop_target=0.9), [0.5, 0.95])
    assert study.status == Study.Status.COMPLETED and study.message == ""


def test_trials_running_at_the_stop_are_stopped_like_a_cancel_and_keep_their_epochs(stopping_study):
    study = stopping_study(parallelism=3, stop_target=0.9)
    first, second, third = (claim(study, f"w{i}").trial for i in range(3))
    trial_epochs.trial_record_epoch(trial_pk=second.pk, execution=0, epoch=0, metrics={"val_accuracy": 0.4})
    pending = Study.objects.get(pk=study.pk).wakeups_pending
    assert finish(first, 0.93, next_claimant=Claimant(tuner_id="next", worker_host="h")).claim is None
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED and study.wakeups_pending == pending  # no wake-up sent
    # The second notices at its next epoch end and is released by its worker; the third had
    # finished its last epoch meanwhile, so its result is kept.
    assert not trial_epochs.trial_record_epoch(trial_pk=second.pk, execution=0, epoch=1,
                                               metrics={"val_accuracy": 0.5})
    trial_claims.finish_trial(trial_pk=second.pk, oracles=ORACLES, outcome=Outcome("released"))
    finish(third, 0.95)
    second.refresh_from_db(), third.refresh_from_db()
    assert second.status == Trial.Status.CANCELLED and second.error == STOPPED_EARLY_REASON
    assert TrialEpoch.objects.filter(trial=second).count() == 1
    assert third.status == Trial.Status.COMPLETED and third.score == 0.95
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
    assert study.message == "Stopped early: val_accuracy reached 0.93 (target 0.9) at trial 1."


def test_the_stop_is_notified_once_with_its_reason(stopping_study, acme, alice):
    opt_in(alice, acme, events=[EventKind.STUDY_COMPLETED])
    study = stopping_study(parallelism=2, stop_target=0.9)
    first, second = claim(study, "a").trial, claim(study, "b").trial
    finish(first, 0.92)
    finish(second, 0.99)  # finishing after the stop changes nothing about the study
    (event,) = NotificationEvent.objects.filter(kind=EventKind.STUDY_COMPLETED)
    assert "finished: 1 trial completed" in event.text
    assert "Stopped early: val_accuracy reached 0.92 (target 0.9) at trial 1." in event.text
    assert event.payload["study"]["message"].startswith("Stopped early:")


def test_a_study_stopped_early_cannot_be_resumed(stopping_study):
    study = run(stopping_study(stop_target=0.5), [0.6])
    with pytest.raises(studies.StudyError, match="cannot be started"):
        studies.study_start(study=study)


def _ran_for(trial, seconds):
    """The trial started `seconds` ago, so its finish records that much device time (one CPU)."""
    Trial.objects.filter(pk=trial.pk).update(started=timezone.now() - timedelta(seconds=seconds))


def test_a_device_hour_budget_stops_the_study_mid_way_with_the_reason(stopping_study):
    study = stopping_study(parallelism=2, stop_device_hours=0.1)  # 360 device-seconds
    first, second = claim(study, "a").trial, claim(study, "b").trial
    _ran_for(first, 200)
    after_first = finish(first, 0.5, next_claimant=Claimant(tuner_id="c", worker_host="h"))
    assert after_first.claim.status == "running"  # 200 of 360 s: the study goes on
    _ran_for(second, 170)
    finish(second, 0.4, status="failed")  # a failed trial held its device too
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED and study.stopped_early
    assert study.message == "Stopped early: its budget of 0.1 device-hours is spent (0.103 device-hours over 2 trials)."
    assert claim(study).status == "stopped"
    # The trial still running stops at its next epoch end, as after any stop.
    third = after_first.claim.trial
    assert not trial_epochs.trial_record_epoch(trial_pk=third.pk, execution=0, epoch=0, metrics={"val_accuracy": 1})
    assert Trial.objects.filter(study=study).count() == 3


def test_a_cancelled_study_over_its_device_hour_budget_is_not_resumed(stopping_study):
    study = stopping_study(parallelism=2, stop_device_hours=0.01)  # 36 device-seconds
    first, second = claim(study, "a").trial, claim(study, "b").trial
    studies.study_cancel(study=study)
    _ran_for(first, 50)
    trial_claims.finish_trial(trial_pk=first.pk, oracles=ORACLES, outcome=Outcome("released"))
    trial_claims.finish_trial(trial_pk=second.pk, oracles=ORACLES, outcome=Outcome("released"))
    study.refresh_from_db()
    with pytest.raises(studies.StudyError, match=r"^Its budget of 0.01 device-hours is spent .* Raise its "
                                                 r"device-hour budget to resume it\.$"):
        studies.study_start(study=study)
    assert Study.objects.get(pk=study.pk).status == Study.Status.CANCELLED
