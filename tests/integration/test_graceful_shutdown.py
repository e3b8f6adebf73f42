"""Graceful shutdown with real worker processes: SIGTERM makes a worker stop its trial (or
model job) at the next epoch end, hand it back without penalty and exit; another worker
finishes it. No reaper runs here (no beat), so nothing is recovered by being found LOST."""

import signal
import time

import pytest

from experiments.models import Study, TrainedModel, Trial
from experiments.services.trained_models import trained_models_request
from tests.conftest import wait_for
from tests.integration.helpers import digits, saved_study, started_study
from tests.integration.restarts import broker
from workers.jobs.trials import SHUTDOWN_REASON

# serial: exits timed in seconds (make test runs it alone).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker, pytest.mark.serial]

EPOCHS = 16  # SlowTiny epochs take >= 0.5 s: a trial runs >= 8 s, long enough to stop mid-way


def _worker_of(workers: dict, worker_name: str):
    return workers[worker_name.split("@")[0]]


@pytest.mark.parametrize("group", [False, True], ids=["main-process", "process-group"])
def test_sigterm_mid_trial_hands_it_back_and_it_completes_elsewhere(acme, alice, start_worker, group):
    broker().flushdb()  # no wake-ups left over from earlier tests
    workers = {name: start_worker(name) for name in ("w1", "w2")}
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=2, epochs=EPOCHS,
                          patience=EPOCHS, parallelism=1)
    victim = wait_for(lambda: Trial.objects.filter(study=study, status="running", epochs__epoch__gte=1).first(),
                      timeout=120, what="a trial two epochs in")
    stopping = _worker_of(workers, victim.worker_name)
    sent_at = time.monotonic()
    stopping.send(signal.SIGTERM, group=group)

    assert stopping.exited_within(30), "the worker did not exit within 30 s of SIGTERM"
    exit_seconds = time.monotonic() - sent_at
    victim.refresh_from_db()
    assert victim.status == Trial.Status.CANCELLED and victim.error == SHUTDOWN_REASON
    assert victim.epochs.count() < EPOCHS, "it ran to its end instead of stopping at an epoch end"
    assert exit_seconds < 15, f"{exit_seconds:.1f} s to exit; an epoch takes about 0.5 s"

    wait_for(lambda: Study.objects.get(pk=study.pk).status in ("completed", "failed"), timeout=180,
             what="the study to finish on the other worker")
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
    retry = Trial.objects.get(study=study, trial_id=victim.trial_id, status="completed")
    assert retry.hyperparameters == victim.hyperparameters and retry.worker_name != victim.worker_name
    statuses = sorted(Trial.objects.filter(study=study).values_list("status", flat=True))
    assert statuses == ["cancelled", "completed", "completed"]  # nothing LOST, nothing FAILED
    assert "stop at their next epoch end" in stopping.log()


def test_sigterm_mid_retrain_requeues_the_model_without_penalty(acme, alice, start_worker):
    broker().flushdb()
    study = saved_study(acme, alice, digits(acme, alice), hypermodel="slow", epochs=EPOCHS)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=12,
                                 metrics={"val_accuracy": 0.9, "val_loss": 0.4})
    first = start_worker("w1")
    (model,) = trained_models_request(study=study, user=alice, trials=[trial], method="retrain",
                                      epoch_source="recorded")
    wait_for(lambda: TrainedModel.objects.get(pk=model.pk).epoch_rows.exists(), timeout=120,
             what="the retrain to be training")
    first.send(signal.SIGTERM, group=False)
    assert first.exited_within(30), "the worker did not exit within 30 s of SIGTERM"
    model.refresh_from_db()
    assert model.status == TrainedModel.Status.QUEUED and model.releases == 1

    start_worker("w2")
    wait_for(lambda: TrainedModel.objects.get(pk=model.pk).status in ("completed", "failed"), timeout=180,
             what="the model to be made by the other worker")
    model.refresh_from_db()
    assert model.status == TrainedModel.Status.COMPLETED, model.error
    assert model.attempts == 2 and model.worker_host  # a second attempt, made once
