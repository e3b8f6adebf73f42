"""Nothing is lost when workers die, the broker restarts or the database restarts, and a
duplicated wake-up runs nothing twice. PostgreSQL decides what runs."""

import signal
import threading

import pytest
from celery import current_app

from experiments.models import Study, Trial
from experiments.services.queueing import RUN_TRIAL_TASK
from tests.conftest import wait_for
from tests.integration.helpers import digits, started_study
from tests.integration.restarts import broker, restart_postgres
from tests.integration.test_parallel_search import assert_no_duplicates, finished

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def running_trial(study, worker_name_prefix=None):
    trials = Trial.objects.filter(study=study, status=Trial.Status.RUNNING, epochs__isnull=False)
    if worker_name_prefix:
        trials = trials.filter(worker_name__startswith=worker_name_prefix)
    return trials.first()


def test_a_worker_killed_mid_trial_leaves_the_study_to_finish_on_the_other(acme, alice, start_worker):
    # No beat process: the surviving worker schedules the reaper itself (as in `make run`,
    # where beat lives inside a worker that may be the one killed).
    w1, _ = start_worker("w1"), start_worker("w2")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=5, epochs=3,
                          parallelism=2)
    victim = wait_for(lambda: running_trial(study, "w1@"), timeout=120, what="w1 to be mid-trial")
    w1.kill(signal.SIGKILL)
    wait_for(lambda: finished(study), timeout=300, what="the study to finish on w2")
    assert study.status == Study.Status.COMPLETED, study.message
    victim.refresh_from_db()
    assert victim.status == Trial.Status.LOST and "stopped heartbeating" in victim.error
    completed = assert_no_duplicates(study)
    assert len(completed) == 5
    # The lost trial was retried with the same values (KerasTuner's retry), not skipped.
    retried = next(t for t in completed if t.trial_id == victim.trial_id)
    assert retried.attempt == 2 and retried.hyperparameters == victim.hyperparameters


def test_duplicated_wake_ups_never_run_more_trials_than_the_parallelism(acme, alice, start_worker):
    start_worker("w1", concurrency=2)
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=2,
                          parallelism=1)
    for _ in range(6):  # a redelivered or duplicated task, many times over
        current_app.send_task(RUN_TRIAL_TASK, args=[study.id], queue="cpu")
    most_running = 0
    while not finished(study):
        most_running = max(most_running, Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count())
    assert study.status == Study.Status.COMPLETED, study.message
    assert most_running == 1
    assert len(assert_no_duplicates(study)) == 4
    assert Trial.objects.filter(study=study).count() == 4


def test_a_redis_restart_mid_study_ends_with_the_study_completed(acme, alice, start_worker, start_beat, own_redis):
    start_worker("w1", env=own_redis.env)
    start_beat(env=own_redis.env)
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=2)
    wait_for(lambda: running_trial(study), timeout=120, what="a trial to run")
    own_redis.restart()  # queued wake-ups are gone with it
    wait_for(lambda: finished(study), timeout=300, what="the study to finish after the Redis restart")
    assert study.status == Study.Status.COMPLETED, study.message
    assert len(assert_no_duplicates(study)) == 4


@pytest.mark.alone  # restarts the shared PostgreSQL
def test_a_postgres_restart_mid_study_ends_with_the_study_completed(acme, alice, start_worker, start_beat):
    start_worker("w1")
    start_beat()
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=3)
    wait_for(lambda: running_trial(study), timeout=120, what="a trial to run")
    restart_postgres()
    wait_for(lambda: finished(study), timeout=300, what="the study to finish after the PostgreSQL restart")
    assert study.status == Study.Status.COMPLETED, study.message
    assert len(assert_no_duplicates(study)) == 4


def test_a_study_resumes_after_everything_was_stopped(acme, alice, start_worker, start_beat):
    worker, beat = start_worker("w1"), start_beat()
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=2)
    wait_for(lambda: Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).exists()
             and running_trial(study), timeout=180, what="one finished trial and one running")
    done_before = {t.pk: (t.score, t.finished) for t in Trial.objects.filter(study=study, status="completed")}
    worker.kill(signal.SIGKILL), beat.kill(signal.SIGKILL)
    broker().flushdb()  # the broker's queue is gone too
    start_worker("w1-again"), start_beat("beat-again")
    wait_for(lambda: finished(study), timeout=300, what="the study to finish after the restart")
    assert study.status == Study.Status.COMPLETED, study.message
    assert len(assert_no_duplicates(study)) == 4
    for pk, (score, finished_at) in done_before.items():
        trial = Trial.objects.get(pk=pk)
        assert (trial.score, trial.finished) == (score, finished_at), "a finished trial changed"


def test_cancel_stops_every_running_trial_and_resume_continues(acme, alice, start_worker):
    from experiments.services.studies import study_cancel, study_start

    start_worker("w1", concurrency=2)
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=50,
                          patience=50, parallelism=2)
    wait_for(lambda: Trial.objects.filter(study=study, status="running", epochs__isnull=False)
             .distinct().count() == 2, timeout=120, what="two trials mid-training")
    study_cancel(study=study)
    wait_for(lambda: not Trial.objects.filter(study=study, status="running").exists(), timeout=30,
             what="every running trial to stop")
    cancelled = list(Trial.objects.filter(study=study, status=Trial.Status.CANCELLED))
    assert len(cancelled) == 2
    for trial in cancelled:
        assert trial.epochs.count() < 50
    # Resume with a short budget of epochs: the cancelled trials run again with the same values.
    Study.objects.filter(pk=study.pk).update(epochs=2)
    study_start(study=Study.objects.get(pk=study.pk))
    wait_for(lambda: finished(study), timeout=240, what="the resumed study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    completed = assert_no_duplicates(study)
    assert len(completed) == 4
    assert {t.trial_id for t in cancelled} <= {t.trial_id for t in completed}


def test_consecutive_failures_end_the_study_failed_naming_the_errors(acme, alice, start_worker):
    start_worker("w1")
    space = [{"name": "explode", "type": "fixed", "value": True, "parent": None, "parent_values": []},
             {"name": "units", "type": "int", "min": 4, "max": 64, "step": 4, "sampling": "linear",
              "parent": None, "parent_values": []}]
    study = started_study(acme, alice, digits(acme, alice), hypermodel="failing", search_space=space,
                          max_trials=10, max_consecutive_failed_trials=2)
    wait_for(lambda: finished(study), timeout=180, what="the study to fail")
    assert study.status == Study.Status.FAILED
    assert "2 trials failed in a row" in study.message and "deliberately broken" in study.message
    assert Trial.objects.filter(study=study, status=Trial.Status.FAILED).count() == 2


def test_raising_parallelism_while_running_wakes_more_workers(acme, alice, start_worker):
    from experiments.services.studies import study_update_budget

    start_worker("w1", concurrency=2)
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=6, epochs=3,
                          parallelism=1)
    wait_for(lambda: running_trial(study), timeout=120, what="the first trial")
    study_update_budget(study=study, max_trials=8, parallelism=2)
    seen_two = threading.Event()
    wait_for(lambda: Trial.objects.filter(study=study, status="running").count() == 2 or finished(study),
             timeout=120, what="a second trial in flight")
    if Trial.objects.filter(study=study, status="running").count() == 2:
        seen_two.set()
    wait_for(lambda: finished(study), timeout=300, what="the study to finish")
    assert seen_two.is_set()
    assert study.status == Study.Status.COMPLETED
    assert len(assert_no_duplicates(study)) == 8
