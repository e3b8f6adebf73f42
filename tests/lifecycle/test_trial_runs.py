"""Trial runs: claim, finish, stale reap, cancel racing a completion, resume after FAILED,
missing-slot refill and a reaper that survives a bad row."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import Study, Trial
from experiments.services import studies, trial_claims, trial_epochs, trial_oracle, trial_reaper
from experiments.services.trial_oracle import Claimant, Outcome
from workers.tuners.oracle import KerasTunerOracles

ORACLES = KerasTunerOracles()
pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]


def claim(study, tuner="w"):
    return trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=tuner, worker_host="h"),
                                  oracles=ORACLES)


def finish(trial, status="completed", score=0.5, **kwargs):
    outcome = Outcome(status, score=score if status == "completed" else None, best_step=0, metrics={"val_accuracy": 1},
                      error="" if status == "completed" else "boom")
    return trial_claims.finish_trial(trial_pk=trial.pk, outcome=outcome, oracles=ORACLES, **kwargs)


def fresh(study) -> Study:
    return Study.objects.get(pk=study.pk)


def test_a_claim_takes_a_slot_and_a_duplicated_wakeup_finds_none(make_study):
    study = studies.study_start(study=make_study(parallelism=1))
    assert fresh(study).wakeups_pending == 1
    first = claim(study, "a")
    assert first.status == "running" and first.trial.status == Trial.Status.RUNNING
    assert fresh(study).wakeups_pending == 0
    assert claim(study, "b").status == "stopped"  # every slot is busy
    assert Trial.objects.filter(study=study).count() == 1


def test_a_finisher_claims_the_next_trial_under_the_same_lock_and_results_are_immutable(make_study):
    study = studies.study_start(study=make_study(parallelism=1))
    first = claim(study).trial
    following = finish(first, next_claimant=Claimant(tuner_id="w2", worker_host="h")).claim
    assert following.status == "running" and following.trial.number == 2
    assert first.claim_ms > 0 and following.trial.claim_ms is None  # only wake-up claims are timed
    first.refresh_from_db()
    assert first.status == Trial.Status.COMPLETED and first.score == 0.5 and first.best_epoch == 1
    assert finish(first, score=0.1).claim is None  # a second finish changes nothing
    first.refresh_from_db()
    assert first.score == 0.5
    assert fresh(study).wakeups_pending == 0  # the slot is busy again: no wake-up needed


def test_the_last_trial_completes_the_study(make_study):
    study = studies.study_start(study=make_study(parallelism=1, max_trials=2))
    trial = claim(study).trial
    trial = finish(trial, next_claimant=Claimant(tuner_id="w2", worker_host="h")).claim.trial
    assert finish(trial, next_claimant=Claimant(tuner_id="w3", worker_host="h")).claim is None
    study = fresh(study)
    assert study.status == Study.Status.COMPLETED and study.wakeups_pending == 0


def test_a_spent_budget_with_no_completed_trial_fails_the_study_with_the_last_error(make_study):
    # Two failures are below the consecutive-failure limit: the budget ends the study, and a
    # study where nothing succeeded is FAILED, not COMPLETED (a wrong Fixed value did that).
    study = studies.study_start(study=make_study(parallelism=1, max_trials=2, max_retries_per_trial=0,
                                                    max_consecutive_failed_trials=5))
    trial = claim(study).trial
    trial = finish(trial, status="failed", next_claimant=Claimant(tuner_id="w2", worker_host="h")).claim.trial
    finish(trial, status="failed")
    study = fresh(study)
    assert study.status == Study.Status.FAILED
    assert "no trial completed" in study.message and "boom" in study.message


def test_a_stale_trial_is_lost_retried_with_its_values_and_its_slot_refilled(make_study):
    study = studies.study_start(study=make_study(parallelism=1))
    trial = claim(study).trial
    died = timezone.now() - timedelta(hours=1)
    Trial.objects.filter(pk=trial.pk).update(started=died - timedelta(minutes=10), heartbeat=died)
    assert trial_reaper.trials_reap_stale() == 1
    trial.refresh_from_db()
    assert trial.status == Trial.Status.LOST and "stopped heartbeating" in trial.error
    # Its device time runs to its worker's last heartbeat, not to the reaper's pass.
    assert (trial.device_kind, trial.device_seconds) == ("cpu", 600.0)
    assert fresh(study).wakeups_pending == 1  # its slot got a wake-up
    retry = claim(study, "other").trial
    assert (retry.trial_id, retry.attempt, retry.hyperparameters) == (trial.trial_id, 2, trial.hyperparameters)


def test_a_heartbeating_trial_is_never_reaped(make_study, settings):
    study = studies.study_start(study=make_study(parallelism=1))
    trial = claim(study).trial
    Trial.objects.filter(pk=trial.pk).update(
        heartbeat=timezone.now() - timedelta(seconds=settings.TRIAL_STALE_SECONDS - 2))
    assert trial_reaper.trials_reap_stale() == 0
    assert trial_epochs.trial_heartbeat(trial_pk=trial.pk)
    trial.refresh_from_db()
    assert trial.status == Trial.Status.RUNNING


def test_a_trial_completing_as_the_study_is_cancelled_keeps_its_result(make_study):
    study = studies.study_start(study=make_study(parallelism=2))
    racing, stopped = claim(study, "a").trial, claim(study, "b").trial
    studies.study_cancel(study=study)
    assert not trial_epochs.trial_record_epoch(trial_pk=stopped.pk, execution=0, epoch=0, metrics={})
    finish(racing, score=0.7, next_claimant=Claimant(tuner_id="a2", worker_host="h"))
    finish(stopped, status="released")
    racing.refresh_from_db()
    stopped.refresh_from_db()
    assert racing.status == Trial.Status.COMPLETED and racing.score == 0.7  # kept, not thrown away
    assert stopped.status == Trial.Status.CANCELLED
    assert Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count() == 0  # nothing new claimed
    # Resumed: the stopped trial runs again with the same values; the completed one does not.
    studies.study_start(study=study)
    again = claim(study, "c").trial
    assert (again.trial_id, again.attempt) == (stopped.trial_id, 2)


def test_resume_refuses_a_study_that_never_started_and_changes_nothing(make_study):
    study = make_study()
    with pytest.raises(studies.StudyError, match="never started; start it instead"):
        studies.study_resume(study=study)
    assert fresh(study).status == Study.Status.CREATED and fresh(study).wakeups_pending == 0


def test_a_failed_study_resumes_for_real(make_study):
    study = studies.study_start(study=make_study(parallelism=1, max_consecutive_failed_trials=2))
    trial = claim(study).trial
    trial = finish(trial, status="failed", next_claimant=Claimant(tuner_id="w2", worker_host="h")).claim.trial
    finish(trial, status="failed", next_claimant=Claimant(tuner_id="w3", worker_host="h"))
    study = fresh(study)
    assert study.status == Study.Status.FAILED and "2 trials failed in a row" in study.message
    studies.study_start(study=study)
    trial = claim(study, "after-resume").trial
    assert trial is not None
    finish(trial, status="failed", next_claimant=Claimant(tuner_id="w4", worker_host="h"))
    assert fresh(study).status == Study.Status.RUNNING  # one failure since the restart, not three


def sent_ago(study, seconds: float) -> None:
    Study.objects.filter(pk=study.pk).update(last_wakeup=timezone.now() - timedelta(seconds=seconds))


def test_a_lost_wakeup_is_sent_again_even_while_the_study_is_busy(make_study, settings):
    study = studies.study_start(study=make_study(parallelism=2))
    claim(study, "a")  # one slot runs; the other wake-up was lost by the broker
    assert trial_reaper.studies_refill() == 0  # sent just now: it may still arrive
    sent_ago(study, settings.RESEND_AFTER_SECONDS + 1)
    assert trial_reaper.studies_refill() == 1
    study = fresh(study)
    assert (study.wakeups_pending, study.wakeup_resends) == (1, 1)
    # Still unanswered: the next resend waits twice as long.
    sent_ago(study, settings.RESEND_AFTER_SECONDS + 1)
    assert trial_reaper.studies_refill() == 0
    sent_ago(study, 2 * settings.RESEND_AFTER_SECONDS + 1)
    assert trial_reaper.studies_refill() == 1
    claim(study, "b")  # it arrived: both slots run, and the backoff starts again
    assert fresh(study).wakeup_resends == 0
    sent_ago(study, 3600)
    assert trial_reaper.studies_refill() == 0  # no free slot


def test_the_reaper_skips_a_bad_row_and_handles_the_rest(make_study, caplog):
    broken = studies.study_start(study=make_study(name="broken", parallelism=1))
    healthy = studies.study_start(study=make_study(name="healthy", parallelism=1))
    bad, good = claim(broken).trial, claim(healthy).trial
    Trial.objects.filter(pk=bad.pk).update(kt_state=["not", "a trial state"])  # cannot take the reaper's mark
    Trial.objects.filter(pk__in=[bad.pk, good.pk]).update(heartbeat=timezone.now() - timedelta(hours=1))
    with caplog.at_level(logging.ERROR):
        assert trial_reaper.trials_reap_stale() == 1
    assert f"lost trial {bad.pk}" in caplog.text
    assert Trial.objects.get(pk=good.pk).status == Trial.Status.LOST
    assert Trial.objects.get(pk=bad.pk).status == Trial.Status.RUNNING  # rolled back: retried next time


def test_the_reaper_needs_no_tuner_and_the_next_claim_tells_it(make_study):
    """The reaper runs in a worker's main process, which never imports KerasTuner: it only
    marks the row; the study's next claim tells the tuner, which then retries the values."""
    import subprocess
    import sys

    code = ("import sys, django; django.setup(); import workers.host.reaper, workers.host.fleet; "
            "bad = [m for m in ('keras_tuner', 'keras', 'tensorflow', 'jax') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    study = studies.study_start(study=make_study(parallelism=1, max_retries_per_trial=1))
    lost = claim(study).trial
    Trial.objects.filter(pk=lost.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    version = fresh(study).oracle_version
    assert trial_reaper.trials_reap_stale() == 1
    lost.refresh_from_db()
    assert lost.kt_state[trial_oracle.TELL_TUNER] == "fail" and fresh(study).oracle_version == version
    retry = claim(study, "other").trial
    lost.refresh_from_db()
    assert trial_oracle.TELL_TUNER not in lost.kt_state and lost.kt_state["status"] == "INVALID"
    assert (retry.trial_id, retry.attempt) == (lost.trial_id, 2)


def test_grid_values_reach_the_hypermodel_in_their_own_type(make_study):
    space = [{"name": "units", "type": "int", "min": 8, "max": 64, "step": 2, "sampling": "log",
              "parent": None, "parent_values": []}]
    study = studies.study_start(study=make_study(tuner="grid", search_space=space, parallelism=1))
    seen = []
    trial = claim(study).trial
    while trial is not None:
        seen.append(trial.hyperparameters["units"])
        trial.refresh_from_db()
        assert trial.hyperparameters["units"] == seen[-1]
        following = finish(trial, next_claimant=Claimant(tuner_id=f"g{len(seen)}", worker_host="h")).claim
        trial = following.trial if following and following.status == "running" else None
    assert seen == [8, 16, 32, 64] and all(type(v) is int for v in seen)


def test_the_bayesian_tuner_uses_the_studys_initial_random_trials(make_study):
    from workers.tuners.oracle import load_oracle

    study = make_study(tuner="bayesian", initial_random_trials=2)
    assert load_oracle(study, trial_oracle.trial_rows_for_oracle(study)).num_initial_points == 2
    default = make_study(tuner="bayesian")  # 3 x 2 hyperparameters, but at most a quarter of 6 trials, at least 3
    assert load_oracle(default, trial_oracle.trial_rows_for_oracle(default)).num_initial_points == 3


def test_bayesian_optimisation_closes_in_on_the_optimum_after_its_random_start(make_study):
    import math

    study = studies.study_start(study=make_study(tuner="bayesian", initial_random_trials=4, max_trials=16,
                                                    parallelism=1))
    distances = []
    trial = claim(study).trial
    while trial is not None:
        distance = abs(math.log10(trial.hyperparameters["learning_rate"]) + 2)  # the optimum is 0.01
        distances.append(distance)
        following = finish(trial, score=-distance ** 2,
                           next_claimant=Claimant(tuner_id=f"b{len(distances)}", worker_host="h")).claim
        trial = following.trial if following and following.status == "running" else None
    assert len(distances) == 16
    # The guided trials find a point closer than the random start did (KerasTuner's own
    # implementation, same seed: 0.002; the random start: 0.051; log10 range 2 wide).
    assert min(distances[4:]) < min(min(distances[:4]), 0.05), distances


def test_a_reaped_failure_told_after_a_cancel_leaves_the_study_cancelled(make_study):
    """The reaper marked a lost attempt that counts; the study was cancelled before any claim
    told the tuner. The other trial's release tells it then: the study stays CANCELLED (the
    failure limit only ends a running study) and the lost values run again on resume."""
    study = studies.study_start(study=make_study(parallelism=2, max_retries_per_trial=1,
                                                    max_consecutive_failed_trials=1))
    lost, other = claim(study, "a").trial, claim(study, "b").trial
    Trial.objects.filter(pk=lost.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert trial_reaper.trials_reap_stale() == 1
    studies.study_cancel(study=study)
    finish(other, status="released")
    study = fresh(study)
    lost.refresh_from_db()
    assert study.status == Study.Status.CANCELLED
    assert trial_oracle.TELL_TUNER not in lost.kt_state


def test_nearby_seeds_draw_unrelated_trials_and_the_same_seed_the_same_ones(make_study):
    """KerasTuner draws value i with seed + i: unspread, with two values a trial, seed 3's first trial
    was seed 1's second."""
    def draws(seed):
        study = studies.study_start(study=make_study(seed=seed, max_trials=4, parallelism=1,
                                                       name=f"seed-{seed}-{Study.objects.count()}"))
        values = []
        for _ in range(4):
            trial = claim(study).trial
            values.append(tuple(sorted(trial.hyperparameters.items())))
            finish(trial)
        return values

    first, second, third = draws(1), draws(2), draws(3)
    assert not set(first) & set(second) and not set(first) & set(third) and not set(second) & set(third)
    assert draws(1) == first, "the same seed draws the same sequence"
