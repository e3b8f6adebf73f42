"""Re-running a trial in a real Chromium: the editor clicks *Re-run this trial*, the page polls
while it waits and runs, and reloads itself when it ends to show how close it came, with the
re-run's learning curves drawn beside the trial's. The worker's side goes through the same
lifecycle services a worker calls (claim, epochs, complete), without training."""

import pytest

from experiments.models import TrialRerun
from experiments.services import jobs
from experiments.services.datasets import dataset_create_bundled
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.trial_reruns import rerun_complete, rerun_record_epoch
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_trial

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_editor_reruns_a_trial_and_the_page_shows_how_close_it_came(live_server, page, acme, alice, screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    study = saved_study(acme, alice, iris, name="iris study", hypermodel="dense", epochs=3)
    environment = {"seed": study.seed + 1, "host": "cpu-host-1",
                   "devices": {"kind": "cpu", "names": ["/device:CPU:0"], "replicas": 1},
                   "versions": {"python": "3.11.9", "tensorflow": "2.21.0"},
                   "dataset": {"id": iris.id, "name": "iris", "sha256": iris.arrays.sha256, "upload_sha256": None,
                               "split": {"seed": iris.split_seed, "val_fraction": iris.val_fraction,
                                         "test_fraction": iris.test_fraction, "sizes": iris.split_sizes}}}
    trial = finished_trial(study, 1, score=0.9, environment=environment)
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/{study.id}/trials/{trial.pk}/")
    assert "cpu-host-1" in page.locator("#reproducibility").inner_text()
    page.locator("#rerun-trial").click()
    page.wait_for_selector("#rerun-1")
    assert "waiting for a worker" in page.locator("#rerun-1").inner_text()
    assert page.locator("#rerun-trial").is_disabled()

    rerun = TrialRerun.objects.get(trial=trial)
    attempt = jobs.job_claim(kind=JOB_KINDS["reruns"], pk=rerun.pk, worker_host="cpu-host-2").attempts
    for epoch in range(3):
        rerun_record_epoch(rerun_pk=rerun.pk, attempt=attempt, execution=0, epoch=epoch,
                           metrics={"loss": 1 / (epoch + 1), "val_loss": 1.2 / (epoch + 1),
                                    "accuracy": 0.5 + epoch / 100, "val_accuracy": 0.44 + epoch / 100})
    page.wait_for_function("document.querySelector('#rerun-1 .rerun-progress')?.innerText.includes('epoch 3')")
    rerun_complete(rerun_pk=rerun.pk, attempt=attempt, score=0.88, best_epoch=3,
                   metrics={"val_accuracy": 0.88, "val_loss": 0.3, "accuracy": 0.95, "loss": 0.2},
                   compute={"device_kind": "cpu"}, environment={**environment, "host": "cpu-host-2"},
                   duration_seconds=1.5)

    # The page reloads itself when the last re-run ends.
    page.wait_for_selector("#rerun-1 .rerun-summary", timeout=20_000)
    summary = page.locator("#rerun-1 .rerun-summary").inner_text()
    assert summary == "val_accuracy 0.8800 against 0.9000: 0.0200 apart (2.2222 %)."
    assert page.locator('#rerun-1 .environment-differences tr[data-key="host"]').inner_text().split("\t") == [
        "host", "cpu-host-1", "cpu-host-2"]
    assert not page.locator("#rerun-trial").is_disabled()
    page.wait_for_function("document.getElementById('learning-curves-chart').data?.length > 0")
    traces = page.evaluate("document.getElementById('learning-curves-chart').data.map((t) => t.name)")
    assert {"this trial: validation", "re-run 1: validation"} <= set(traces)
    screenshot("trial-with-rerun")
