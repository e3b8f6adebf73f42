"""Recovery bounds, with real worker processes, Redis and PostgreSQL: on a loaded host, a worker
killed mid-trial has its trial retried within 30 s on the default settings, and a study whose
wake-ups were lost in a Redis outage has both slots busy again within 30 s of Redis coming
back; a wake-up lost by the broker gives the study its slot back while it is busy; a model
request whose task Redis lost is made."""

import os
import signal
import subprocess
import sys
import time

import pytest

from experiments.models import Study, TrainedModel, Trial
from experiments.services.trained_models import trained_models_request
from tests.conftest import wait_for
from tests.integration.helpers import digits, saved_study, started_study
from tests.integration.restarts import broker

# Each test's Redis is its own (own_redis) where it is stopped: none restarts the shared one.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

# The product's defaults (webapp/settings.py), not the suite's fast ones: the bound is theirs.
DEFAULT_RECOVERY = {"TUNEBOARD_TRIAL_HEARTBEAT_SECONDS": "5", "TUNEBOARD_TRIAL_STALE_SECONDS": "20",
                    "TUNEBOARD_REAPER_INTERVAL_SECONDS": "5", "TUNEBOARD_WORKER_HEARTBEAT_SECONDS": "5"}


@pytest.fixture
def cpu_hog():
    """The loaded host: a process spinning on every core, beside the workers' own training."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    yield
    for hog in hogs:
        hog.kill()
        hog.wait()


@pytest.mark.alone  # a hog on every core, a bound in seconds
def test_a_trial_of_a_killed_worker_is_retried_within_30_seconds_on_a_loaded_host(acme, alice, start_worker,
                                                                                   cpu_hog):
    # No beat: the reaper-leader worker reaps from its main process, even with every child busy.
    workers = {name: start_worker(name, concurrency=2, env=DEFAULT_RECOVERY) for name in ("w1", "w2")}
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=200,
                          patience=200, parallelism=2)
    wait_for(lambda: Trial.objects.filter(study=study, status="running", epochs__isnull=False).distinct().count() == 2,
             timeout=180, what="two trials mid-training")
    victim = Trial.objects.filter(study=study, status="running").first()
    killed_at = time.monotonic()
    workers[victim.worker_name.split("@")[0]].kill(signal.SIGKILL)
    retry = wait_for(lambda: Trial.objects.filter(study=study, trial_id=victim.trial_id, attempt=2).first(),
                     timeout=90, interval=0.1, what="the lost trial's retry to be claimed")
    seconds = time.monotonic() - killed_at
    assert seconds <= 30, f"the retry was claimed {seconds:.1f} s after the kill"
    victim.refresh_from_db()
    assert victim.status == Trial.Status.LOST
    assert retry.worker_name != victim.worker_name and retry.hyperparameters == victim.hyperparameters


@pytest.mark.alone  # a hog on every core, a bound in seconds
def test_after_a_redis_outage_both_slots_are_busy_again_within_30_seconds(acme, alice, start_worker, cpu_hog,
                                                                          own_redis):
    """Redis stopped for 10 s while trials end: their wake-ups cannot be sent (and do not count
    as sent), the ones in Redis are lost with it. Both slots run again soon after it is back."""
    # Each task runs one trial and hands its slot back through the broker: every slot needs a wake-up.
    start_worker("w1", concurrency=2, env={**DEFAULT_RECOVERY, "TUNEBOARD_RESEND_AFTER_SECONDS": "30",
                                           "TUNEBOARD_CONTINUE_SECONDS": "0", **own_redis.env})
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=200, epochs=2,
                          patience=2, parallelism=2)
    wait_for(lambda: Trial.objects.filter(study=study, status="running").count() == 2, timeout=180,
             interval=0.1, what="both slots running")
    own_redis.stop()
    time.sleep(10)
    own_redis.start()
    back = time.monotonic()
    wait_for(lambda: Trial.objects.filter(study=study, status="running").count() == 2, timeout=60, interval=0.1,
             what="both slots running again after Redis came back")
    seconds = time.monotonic() - back
    assert seconds <= 30, f"both slots were busy again {seconds:.1f} s after Redis was back"
    study.refresh_from_db()
    assert study.status == Study.Status.RUNNING and not Trial.objects.filter(study=study, status="lost").exists()


@pytest.mark.serial  # a bound in seconds
def test_a_lost_wakeup_gives_a_busy_study_its_slot_back(acme, alice, start_worker, start_beat):
    broker().flushdb()  # nothing left over from earlier tests
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=30,
                          patience=30, parallelism=2)
    queue = broker()
    wait_for(lambda: queue.llen("cpu") == 2, timeout=10, what=f"both wake-ups in the queue: {queue.keys()}")
    queue.lpop("cpu")  # the broker loses one of them
    start_worker("w1", concurrency=2)
    start_beat()
    wait_for(lambda: Trial.objects.filter(study=study, status="running").exists(), timeout=120,
             what="the wake-up that arrived to run a trial")
    first_claim = time.monotonic()
    # The study is busy (one slot runs trials back to back), yet its lost slot comes back.
    wait_for(lambda: Trial.objects.filter(study=study, status="running").count() == 2, timeout=30,
             what="the second slot to be refilled")
    assert time.monotonic() - first_claim < 20


def test_a_model_request_lost_with_the_broker_is_still_made(acme, alice, start_worker, start_beat, own_redis):
    study = saved_study(acme, alice, digits(acme, alice), hypermodel="tiny")
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2,
                                 metrics={"val_accuracy": 0.9, "val_loss": 0.4})
    (model,) = trained_models_request(study=study, user=alice, trials=[trial], method="retrain",
                                      epoch_source="recorded")
    wait_for(lambda: broker().llen("cpu") == 1, timeout=10, what="the model's task in the queue")
    sent_first = TrainedModel.objects.get(pk=model.pk).last_sent
    own_redis.restart()  # the task is gone; the page had said it started
    start_worker("w1", env=own_redis.env)
    start_beat(env=own_redis.env)
    wait_for(lambda: TrainedModel.objects.get(pk=model.pk).status in ("completed", "failed"), timeout=180,
             what="the model to be made")
    model.refresh_from_db()
    assert model.status == TrainedModel.Status.COMPLETED, model.error
    assert model.last_sent > sent_first and model.attempts == 1  # sent again by the reaper, made once
    assert model.files.filter(format="keras").exists()
