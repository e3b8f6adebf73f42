"""Re-runs: requested for completed trials only, one at a time, with the trial's own seed; the
model-run lifecycle (one claim per attempt, fenced writes, reaper); and they stay out of the
search: no trial row, no oracle write, no budget spent. A finished trial keeps the environment
its worker recorded."""

from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import Study, Trial, TrialRerun, TrialRerunEpoch
from experiments.services import jobs, studies, trial_claims, trial_reruns
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.trial_oracle import Claimant, Outcome
from experiments.services.trial_reruns import RerunRequestError, trial_rerun_request
from workers.tuners.oracle import KerasTunerOracles

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")]
ORACLES = KerasTunerOracles()


@pytest.fixture
def trial(make_study):
    study = make_study(seed=7)
    return Trial.objects.create(study=study, trial_id="2", number=3, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2,
                                metrics={"val_accuracy": 0.9})


def claim(rerun, host="a"):
    return jobs.job_claim(kind=JOB_KINDS["reruns"], pk=rerun.pk, worker_host=host)


def complete(rerun, attempt, score=0.9):
    return trial_reruns.rerun_complete(rerun_pk=rerun.pk, attempt=attempt, score=score, best_epoch=2,
                                       metrics={"val_accuracy": score}, compute={"device_kind": "cpu"},
                                       environment={"seed": rerun.seed, "host": "a"}, duration_seconds=1.0)


def test_a_rerun_is_queued_with_the_trials_seed_and_sent(trial, alice):
    rerun = trial_rerun_request(trial=trial, user=alice)
    rerun.refresh_from_db()
    assert (rerun.number, rerun.status, rerun.seed, rerun.created_by) == (1, TrialRerun.Status.QUEUED, 7 + 3, alice)
    assert rerun.last_sent is not None  # the task goes out on commit; the reaper re-sends from here


def test_the_recorded_seed_wins_over_the_derived_one(trial, alice):
    Trial.objects.filter(pk=trial.pk).update(environment={"seed": 1234})
    trial.refresh_from_db()
    assert trial_rerun_request(trial=trial, user=alice).seed == 1234


@pytest.mark.parametrize("status", [Trial.Status.RUNNING, Trial.Status.FAILED, Trial.Status.LOST])
def test_only_a_completed_trial_can_be_rerun(trial, alice, status):
    Trial.objects.filter(pk=trial.pk).update(status=status)
    trial.refresh_from_db()
    with pytest.raises(RerunRequestError, match="Only a completed trial can be re-run"):
        trial_rerun_request(trial=trial, user=alice)
    assert not TrialRerun.objects.exists()


def test_one_rerun_at_a_time_and_the_next_one_is_numbered_after_it(trial, alice):
    first = trial_rerun_request(trial=trial, user=alice)
    with pytest.raises(RerunRequestError, match="already queued or running"):
        trial_rerun_request(trial=trial, user=alice)
    attempt = claim(first).attempts
    with pytest.raises(RerunRequestError):
        trial_rerun_request(trial=trial, user=alice)
    assert complete(first, attempt)
    assert trial_rerun_request(trial=trial, user=alice).number == 2


def test_a_rerun_stays_out_of_the_search(make_study, alice):
    study = studies.study_start(study=make_study(parallelism=1, max_trials=2))
    claimed = trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id="w", worker_host="h"),
                                     oracles=ORACLES).trial
    trial_claims.finish_trial(trial_pk=claimed.pk, oracles=ORACLES,
                            outcome=Outcome("completed", score=0.5, best_step=0, metrics={"val_accuracy": 0.5}))
    before = Study.objects.get(pk=study.pk)
    rerun = trial_rerun_request(trial=Trial.objects.get(pk=claimed.pk), user=alice)
    attempt = claim(rerun).attempts
    assert trial_reruns.rerun_record_epoch(rerun_pk=rerun.pk, attempt=attempt, execution=0, epoch=0,
                                           metrics={"val_accuracy": 0.4})
    assert complete(rerun, attempt, score=0.45)
    after = Study.objects.get(pk=study.pk)
    assert Trial.objects.filter(study=study).count() == 1
    assert (after.oracle_state, after.oracle_version) == (before.oracle_state, before.oracle_version)
    assert trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id="w2", worker_host="h"),
                                  oracles=ORACLES).status == "running"  # the budget of 2 still has its second trial


def test_a_superseded_worker_is_refused_and_the_new_attempt_owns_the_rerun(trial, alice):
    rerun = trial_rerun_request(trial=trial, user=alice)
    old = claim(rerun, "a").attempts
    assert claim(rerun, "b") is None  # a duplicated delivery finds nothing
    assert trial_reruns.rerun_record_epoch(rerun_pk=rerun.pk, attempt=old, execution=0, epoch=0, metrics={"loss": 1})
    TrialRerun.objects.filter(pk=rerun.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert jobs.jobs_reap(kind=JOB_KINDS["reruns"])["requeued"] == 1
    new = claim(rerun, "b").attempts
    assert new == old + 1 and not TrialRerunEpoch.objects.filter(rerun=rerun).exists()
    assert not jobs.job_heartbeat(kind=JOB_KINDS["reruns"], pk=rerun.pk, attempt=old)
    assert not trial_reruns.rerun_record_epoch(rerun_pk=rerun.pk, attempt=old, execution=0, epoch=1, metrics={})
    assert not complete(rerun, old)
    assert not jobs.job_fail(kind=JOB_KINDS["reruns"], pk=rerun.pk, attempt=old, error="late")
    assert complete(rerun, new, score=0.88)
    rerun.refresh_from_db()
    assert (rerun.status, rerun.worker_host, rerun.score, rerun.environment["host"]) == (
        TrialRerun.Status.COMPLETED, "b", 0.88, "a")


def test_a_rerun_lost_twice_fails_with_the_reason_and_an_unsent_one_is_sent_again(trial, alice, settings):
    rerun = trial_rerun_request(trial=trial, user=alice)
    long_ago = timezone.now() - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1)
    TrialRerun.objects.filter(pk=rerun.pk).update(last_sent=long_ago)
    assert jobs.jobs_reap(kind=JOB_KINDS["reruns"])["resent"] == 1
    for _ in range(2):
        claim(rerun)
        TrialRerun.objects.filter(pk=rerun.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
        jobs.jobs_reap(kind=JOB_KINDS["reruns"])
    rerun.refresh_from_db()
    assert rerun.status == TrialRerun.Status.FAILED and rerun.error.startswith("Lost 2 times: the worker a")


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_a_finished_trial_keeps_the_environment_its_worker_recorded(make_study, status):
    study = studies.study_start(study=make_study(parallelism=1))
    claimed = trial_claims.claim_trial(study_id=study.pk, claimant=Claimant(tuner_id="w", worker_host="h"),
                                     oracles=ORACLES).trial
    environment = {"seed": 8, "host": "h", "dataset": {"sha256": "a" * 64}}
    outcome = Outcome(status, score=0.5 if status == "completed" else None, best_step=0,
                      metrics={"val_accuracy": 0.5}, error="" if status == "completed" else "boom",
                      environment=environment)
    trial_claims.finish_trial(trial_pk=claimed.pk, outcome=outcome, oracles=ORACLES)
    assert Trial.objects.get(pk=claimed.pk).environment == environment


def test_a_rerun_stops_at_the_next_epoch_end_once_its_worker_is_stopping(trial, alice):
    from workers.host import shutdown
    from workers.jobs.reruns import _FencedReporter

    rerun = trial_rerun_request(trial=trial, user=alice)
    reporter = _FencedReporter(rerun.pk, claim(rerun).attempts)
    assert reporter.epoch_end(0, 0, {"loss": 1.0})  # owned, not stopping: it trains on
    shutdown.request_stop()
    try:
        assert not reporter.epoch_end(0, 1, {"loss": 0.9})  # recorded, then it stops and the runner hands it back
    finally:
        shutdown._FLAG[0] = 0
    assert TrialRerunEpoch.objects.filter(rerun=rerun).count() == 2
