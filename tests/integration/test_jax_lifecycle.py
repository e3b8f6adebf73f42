"""The trial lifecycle on JAX workers (TensorFlow not importable), one real-process test each:
pruning, cancel, SIGTERM (the trial handed back at an epoch end, finished elsewhere) and
SIGKILL (the lost trial retried on the other worker) behave as on TensorFlow workers."""

import signal
import time

import pytest

from experiments.models import Study, Trial
from experiments.services.studies import study_cancel
from tests.conftest import wait_for
from tests.integration.helpers import digits, started_study
from tests.integration.restarts import broker
from tests.integration.test_jax_worker import JAX_WORKER
from tests.integration.test_lost_work import running_trial
from tests.integration.test_parallel_search import assert_no_duplicates, finished
from tests.integration.test_pruning import MEDIAN, SEARCH, breast_cancer  # noqa: F401  (a fixture)
from workers.jobs.trials import SHUTDOWN_REASON

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

JAX = {"backend": "jax"}


def _jax_workers(start_worker, *names, concurrency=1):
    return {name: start_worker(name, queues="cpu-jax", concurrency=concurrency, env=JAX_WORKER) for name in names}


def test_median_pruning_stops_bad_trials_on_a_jax_worker(acme, alice, breast_cancer, start_worker):  # noqa: F811
    _jax_workers(start_worker, "jax1")
    study = started_study(acme, alice, breast_cancer, name="pruned on jax", **{**SEARCH, **MEDIAN, **JAX})
    wait_for(lambda: finished(study), timeout=300, what="the pruned study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    trials = list(study.trials.all())
    assert len(trials) == SEARCH["max_trials"] and all(t.compute["backend"] == "jax" for t in trials)
    stopped = [t for t in trials if t.status == Trial.Status.PRUNED]
    assert stopped, "median pruning stopped no trial"
    for trial in stopped:
        assert trial.epochs_trained < SEARCH["epochs"] and trial.pruning["epoch"] == trial.epochs_trained
        assert trial.pruning["value"] > trial.pruning["threshold"] and trial.checkpoint_id is not None


def test_cancel_stops_running_jax_trials(acme, alice, start_worker):
    _jax_workers(start_worker, "jax1", concurrency=2)
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=4, epochs=50, patience=50,
                          parallelism=2, **JAX)
    wait_for(lambda: Trial.objects.filter(study=study, status="running", epochs__isnull=False).distinct().count() == 2,
             timeout=120, what="two JAX trials mid-training")
    study_cancel(study=study)
    wait_for(lambda: not Trial.objects.filter(study=study, status="running").exists(), timeout=30,
             what="every running trial to stop")
    cancelled = list(Trial.objects.filter(study=study, status=Trial.Status.CANCELLED))
    assert len(cancelled) == 2 and all(trial.epochs.count() < 50 for trial in cancelled)


@pytest.mark.serial  # the exit is timed in seconds
def test_sigterm_hands_a_jax_trial_back_and_it_completes_on_the_other_jax_worker(acme, alice, start_worker):
    broker().flushdb()
    workers = _jax_workers(start_worker, "jax1", "jax2")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=2, epochs=16, patience=16,
                          parallelism=1, **JAX)
    victim = wait_for(lambda: Trial.objects.filter(study=study, status="running", epochs__epoch__gte=1).first(),
                      timeout=120, what="a JAX trial two epochs in")
    stopping = workers[victim.worker_name.split("@")[0]]
    sent_at = time.monotonic()
    stopping.send(signal.SIGTERM, group=False)
    assert stopping.exited_within(30), "the JAX worker did not exit within 30 s of SIGTERM"
    assert time.monotonic() - sent_at < 15
    victim.refresh_from_db()
    assert victim.status == Trial.Status.CANCELLED and victim.error == SHUTDOWN_REASON
    wait_for(lambda: finished(study), timeout=180, what="the study to finish on the other JAX worker")
    assert study.status == Study.Status.COMPLETED, study.message
    retry = Trial.objects.get(study=study, trial_id=victim.trial_id, status="completed")
    assert retry.hyperparameters == victim.hyperparameters and retry.worker_name != victim.worker_name


def test_a_jax_worker_killed_mid_trial_leaves_the_study_to_finish_on_the_other(acme, alice, start_worker):
    workers = _jax_workers(start_worker, "jax1", "jax2")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=3, epochs=3,
                          parallelism=2, **JAX)
    victim = wait_for(lambda: running_trial(study, "jax1@"), timeout=120, what="jax1 to be mid-trial")
    workers["jax1"].kill(signal.SIGKILL)
    wait_for(lambda: finished(study), timeout=300, what="the study to finish on jax2")
    assert study.status == Study.Status.COMPLETED, study.message
    victim.refresh_from_db()
    assert victim.status == Trial.Status.LOST and "stopped heartbeating" in victim.error
    completed = assert_no_duplicates(study)
    retried = next(t for t in completed if t.trial_id == victim.trial_id)
    assert retried.attempt == 2 and retried.hyperparameters == victim.hyperparameters


def test_two_jax_trial_children_packed_on_one_device_each_take_their_share_and_complete(acme, alice, start_worker):
    # CUDA_VISIBLE_DEVICES=0 on a host without one: both children are pinned to "GPU 0", two trials a GPU, and
    # train on the CPU (the JAX worker's platform here), each under its half of the device's memory.
    start_worker("packed", queues="cpu-jax", concurrency=2,
                 env={**JAX_WORKER, "CUDA_VISIBLE_DEVICES": "0", "TUNEBOARD_TRIALS_PER_GPU": "2"})
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=2, epochs=2, patience=2,
                          parallelism=2, **JAX)
    wait_for(lambda: finished(study), timeout=240, what="the packed study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    first, second = Trial.objects.filter(study=study).order_by("started")
    assert first.status == second.status == Trial.Status.COMPLETED
    assert second.started < first.finished  # side by side, one child each
    assert first.compute["memory_fraction"] == second.compute["memory_fraction"] == 0.45
    assert first.compute["backend"] == "jax"
