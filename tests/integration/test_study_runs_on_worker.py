"""A study runs on a real Celery worker process and everything lands in PostgreSQL."""

import pytest

from experiments.models import StoredChunk, Study, Trial, TrialEpoch
from experiments.selectors.artifacts import artifact_verify
from experiments.selectors.job_logs import trial_logs
from experiments.selectors.studies import study_progress
from tests.conftest import wait_for
from tests.integration.helpers import DENSE_SMALL_SPACE, digits, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _finished(study):
    study.refresh_from_db()
    return study.status in (Study.Status.COMPLETED, Study.Status.FAILED, Study.Status.CANCELLED)


def test_a_three_trial_study_on_digits_completes_with_everything_in_postgres(acme, alice, start_worker):
    worker = start_worker()
    study = started_study(acme, alice, digits(acme, alice), hypermodel="dense", search_space=DENSE_SMALL_SPACE,
                          max_trials=3, epochs=3)
    wait_for(lambda: _finished(study), timeout=240, what=f"the study to finish; worker log:\n{worker.log()[-3000:]}")
    assert study.status == Study.Status.COMPLETED, study.message
    trials = list(Trial.objects.filter(study=study).order_by("number"))
    assert [t.status for t in trials] == [Trial.Status.COMPLETED] * 3
    assert len({t.trial_id for t in trials}) == 3
    assert trials[0].claim_ms > 0  # the worker's wake-up claim timed itself (finishers claim the rest)
    for trial in trials:
        assert 0.0 <= trial.score <= 1.0
        assert 1 <= trial.best_epoch <= 3
        assert set(trial.hyperparameters) >= {"num_layers", "units", "learning_rate"}
        assert trial.worker_host and trial.duration_seconds > 0
        epochs = TrialEpoch.objects.filter(trial=trial).order_by("epoch")
        assert [e.epoch for e in epochs] == list(range(epochs.count()))
        assert {"loss", "val_loss", "accuracy", "val_accuracy"} <= set(epochs[0].metrics)
        best = max(e.metrics["val_accuracy"] for e in epochs)
        assert trial.score == pytest.approx(best)
        # The checkpoint is bytes in PostgreSQL whose sha256 verifies.
        assert trial.checkpoint is not None and trial.checkpoint.size > 0
        assert StoredChunk.objects.filter(blob__name=trial.checkpoint.storage_name).exists()
        artifact_verify(artifact=trial.checkpoint)
        # Its log: one line an epoch, written by the worker, closed when the trial ended.
        (log,) = trial_logs(trial)
        assert not log.running and log.attempt == trial.attempt and log.worker == trial.worker_name != ""
        epoch_lines = [line for line in log.text().splitlines() if " epoch " in line]
        assert [line.split(" epoch ")[1].split(":")[0] for line in epoch_lines] == [
            str(e.epoch + 1) for e in epochs]
        assert "val_accuracy" in epoch_lines[0] and "samples/s)" in epoch_lines[0]
        # And what it used of the host: at least its last sample; no GPU here, so no GPU figures (not zeros).
        samples = [sample.values for sample in log.samples.order_by("at")]
        assert samples and all(s["rss_bytes"] > 50 * 2**20 and s["cpu_percent"] >= 0 and "load1" in s
                               for s in samples)
        assert not any("gpus" in s or "device_memory" in s for s in samples)
        assert samples[-1]["samples_per_second"] > 0  # the last epoch's speed, as the trial measured it
    # What it cost: each trial's wall time on the one CPU device it held; the study's figure is their sum.
    for trial in trials:
        assert trial.device_kind == "cpu" and trial.device_seconds == pytest.approx(trial.duration_seconds)
    assert study_progress(study=study)["device_seconds"] == pytest.approx(sum(t.device_seconds for t in trials))
    study.refresh_from_db()
    assert study.oracle_state and len(study.oracle_state["end_order"]) == 3


def test_a_failing_trial_is_recorded_with_its_reason_and_the_study_goes_on(acme, alice, start_worker):
    start_worker()
    space = [{"name": "explode", "type": "choice", "values": [True, False], "ordered": False,
              "parent": None, "parent_values": []}]
    study = started_study(acme, alice, digits(acme, alice), hypermodel="failing", search_space=space,
                          tuner="grid", max_trials=2, objective_metric="val_accuracy")
    wait_for(lambda: _finished(study), timeout=180, what="the study to finish")
    trials = {t.hyperparameters["explode"]: t for t in Trial.objects.filter(study=study)}
    assert trials[True].status == Trial.Status.FAILED
    assert "deliberately broken" in trials[True].error
    assert trials[False].status == Trial.Status.COMPLETED
    assert study.status == Study.Status.COMPLETED


def test_a_nan_loss_fails_the_trial_with_a_readable_reason(acme, alice, start_worker):
    start_worker()
    study = started_study(acme, alice, digits(acme, alice), hypermodel="nan_loss", max_trials=1,
                          max_consecutive_failed_trials=5)
    wait_for(lambda: _finished(study), timeout=180, what="the study to finish")
    trial = Trial.objects.get(study=study)
    assert trial.status == Trial.Status.FAILED
    assert "NaN" in trial.error or "nan" in trial.error


def test_cancel_stops_the_running_trial_within_one_epoch(acme, alice, start_worker):
    from experiments.services.studies import study_cancel

    start_worker()
    study = started_study(acme, alice, digits(acme, alice), max_trials=1, epochs=500, patience=500)
    trial = wait_for(lambda: Trial.objects.filter(study=study, epochs__isnull=False).first(), timeout=120,
                     what="the first epoch")
    study_cancel(study=study)
    epochs_at_cancel = TrialEpoch.objects.filter(trial=trial).count()
    wait_for(lambda: Trial.objects.get(pk=trial.pk).status == Trial.Status.CANCELLED, timeout=60,
             what="the trial to stop")
    assert TrialEpoch.objects.filter(trial=trial).count() <= epochs_at_cancel + 1
