"""The trial and model pages show a Reproducibility section from the environment the worker
recorded; editors can re-run a completed trial, and the trial page then shows how close each
re-run came (objective and metrics side by side, differing environment keys, both learning
curves on one chart). Viewers see no button; other teams get 404."""

import io
import json

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import Artifact, Dataset, Trial, TrialRerun, TrialRerunEpoch, Worker
from experiments.services.artifacts import artifact_create
from tests.fixtures.environments import changed
from tests.web.pages import json_script, page_text, shows

pytestmark = pytest.mark.django_db


def _environment(dataset, **changes) -> dict:
    record = {
        "seed": 2, "host": "cpu-host-1",
        "devices": {"kind": "cpu", "names": ["/job:localhost/replica:0/task:0/device:CPU:0"], "replicas": 1},
        "versions": {"python": "3.11.9", "tensorflow": "2.21.0", "keras": "3.15.1", "keras-tuner": "1.4.8",
                     "numpy": "2.4.6", "tuneboard": "0.1.0"},
        "dataset": {"id": dataset.id, "name": dataset.name, "sha256": dataset.arrays.sha256, "upload_sha256": None,
                    "split": {"seed": dataset.split_seed, "val_fraction": dataset.val_fraction,
                              "test_fraction": dataset.test_fraction, "sizes": dataset.split_sizes}},
        "hypermodel": {"name": "dense", "team": False, "target": "workers.hypermodels.dense:build_dense",
                       "module": "workers.hypermodels.dense", "version": None, "source_sha256": "f" * 64},
        "training": {"objective": "val_accuracy", "direction": "max", "epochs": 2, "initial_epoch": 0,
                     "patience": 2, "batch_size": 32, "executions": 1},
    }
    return changed(record, **changes)


@pytest.fixture
def recorded_trial(acme_trial, acme_dataset):
    Trial.objects.filter(pk=acme_trial.pk).update(environment=_environment(acme_dataset))
    acme_trial.refresh_from_db()
    return acme_trial


def _finished_rerun(trial, number=1, score=0.875, environment=None, **fields):
    rerun = TrialRerun.objects.create(
        trial=trial, number=number, seed=2, status=TrialRerun.Status.COMPLETED, score=score, best_epoch=2,
        metrics={"val_accuracy": score, "val_loss": 0.3}, environment=environment or trial.environment,
        worker_host="cpu-host-1", duration_seconds=2.5, finished=timezone.now(), **fields)
    for epoch in (0, 1):
        TrialRerunEpoch.objects.create(rerun=rerun, epoch=epoch, metrics={"loss": 1.1 - epoch / 2,
                                                                          "val_accuracy": 0.7 + epoch / 10})
    return rerun


def _trial_page(client, trial):
    return client.get(reverse("trial_detail", args=[trial.study_id, trial.pk]))


def test_an_editor_sees_the_rerun_button_on_a_completed_trial_and_a_viewer_does_not(client, alice, bob, acme_trial):
    client.force_login(alice)
    assert 'id="rerun-trial"' in page_text(_trial_page(client, acme_trial))
    client.force_login(bob)
    page = page_text(_trial_page(client, acme_trial))
    assert 'id="reruns"' in page and 'id="rerun-trial"' not in page


def test_a_viewer_cannot_request_a_rerun(client, bob, acme_trial):
    client.force_login(bob)
    response = client.post(reverse("trial_rerun", args=[acme_trial.study_id, acme_trial.pk]))
    assert response.status_code == 403 and not TrialRerun.objects.exists()


def test_an_editor_queues_a_rerun_with_the_trials_seed(alice_client, acme_trial):
    response = alice_client.post(reverse("trial_rerun", args=[acme_trial.study_id, acme_trial.pk]), follow=True)
    rerun = TrialRerun.objects.get(trial=acme_trial)
    assert (rerun.status, rerun.seed) == (TrialRerun.Status.QUEUED, acme_trial.study.seed + acme_trial.number)
    assert response.redirect_chain[-1][0].endswith(f"/trials/{acme_trial.pk}/#reruns")
    assert shows(response, f"Re-run 1 queued on the cpu queue with the trial's seed ({rerun.seed}), settings and "
                           "data split; the tuner does not hear of it and the study's budget is untouched.")
    page = page_text(response)
    assert 'id="rerun-1"' in page and "waiting for a worker" in page
    # Polled while it is queued, and no second one can be asked for meanwhile.
    assert reverse("trial_reruns_live", args=[acme_trial.study_id, acme_trial.pk]) in page
    assert 'id="rerun-trial" disabled' in page
    assert "No live worker serves the <strong>cpu</strong> queue: the re-run waits until one starts" in page
    Worker.objects.create(name="w1@host", hostname="host", pid=1, queues=["cpu"])
    assert 'id="rerun-no-live-worker"' not in page_text(_trial_page(alice_client, acme_trial))


def test_a_trial_that_has_not_completed_offers_no_rerun_and_refuses_one(alice_client, acme_trial):
    Trial.objects.filter(pk=acme_trial.pk).update(status=Trial.Status.FAILED, error="boom")
    assert 'id="rerun-trial"' not in page_text(_trial_page(alice_client, acme_trial))
    response = alice_client.post(reverse("trial_rerun", args=[acme_trial.study_id, acme_trial.pk]), follow=True)
    assert shows(response, "Only a completed trial can be re-run; this one is failed.")
    assert not TrialRerun.objects.exists()


def test_the_reproducibility_section_shows_what_the_worker_recorded(alice_client, recorded_trial, acme_dataset):
    page = page_text(_trial_page(alice_client, recorded_trial))
    section = page[page.index('id="reproducibility"'):page.index('id="reruns"')]
    assert '<dd data-env="seed">2</dd>' in section
    assert f"stored splits sha256 <code title=\"{acme_dataset.arrays.sha256}\">" in section
    sizes = acme_dataset.split_sizes
    assert (f"seed {acme_dataset.split_seed} · validation {acme_dataset.val_fraction} · test "
            f"{acme_dataset.test_fraction} · rows: train {sizes['train']}, validation {sizes['validation']}, "
            f"test {sizes['test']}") in section
    assert "cpu-host-1" in section and "CPU (/job:localhost/replica:0/task:0/device:CPU:0) · 1 replica" in section
    assert ("keras 3.15.1 · keras-tuner 1.4.8 · numpy 2.4.6 · python 3.11.9 · tensorflow 2.21.0 · tuneboard 0.1.0"
            in section)
    assert "<code>workers.hypermodels.dense:build_dense</code> · version not declared · source sha256" in section
    assert "2 epochs · early stopping on val_accuracy, patience 2 · batch 32 · 1 execution" in section


def test_a_trial_without_a_record_says_why(alice_client, acme_trial):
    assert "None recorded: it ran before Tuneboard kept one." in page_text(_trial_page(alice_client, acme_trial))
    Trial.objects.filter(pk=acme_trial.pk).update(status=Trial.Status.RUNNING)
    assert "Recorded when it finishes." in page_text(_trial_page(alice_client, acme_trial))


def test_a_finished_rerun_shows_how_close_it_came_and_both_learning_curves(alice_client, recorded_trial):
    _finished_rerun(recorded_trial, score=0.875)
    response = _trial_page(alice_client, recorded_trial)
    page = page_text(response)
    rerun = page[page.index('id="rerun-1"'):]
    # 0.9 in the search, 0.875 again: 0.025 apart, 2.78 % of the original.
    assert "val_accuracy 0.8750 against 0.9000: 0.0250 apart (2.7778 %)." in rerun
    row = rerun[rerun.index('<tr data-metric="objective">'):]
    assert [cell.split("<")[0] for cell in row.split("<td>")[1:5]] == ["0.9000", "0.8750", "-0.0250", "2.7778 %"]
    assert '<tr data-metric="val_loss"><th scope="row">val_loss</th><td>0.3000</td><td>0.3000</td><td>0.0000</td>' \
        in rerun
    assert '<tr data-metric="best_epoch"><th scope="row">best epoch</th><td>2</td><td>2</td><td>0</td>' in rerun
    assert "Same environment as the original" in rerun
    curves = json_script(response, "learning-curves")
    assert [s["name"] for s in curves["series"]] == ["this trial", "re-run 1"]
    assert curves["series"][1]["epoch"] == [1, 2] and curves["series"][1]["loss"] == pytest.approx([1.1, 0.6])
    assert "The learning curves above draw the re-run beside this trial." in page


def test_a_rerun_on_another_machine_lists_the_keys_that_differed(alice_client, recorded_trial, acme_dataset):
    other = _environment(acme_dataset, host="gpu-host-9", devices__kind="gpu", versions__tensorflow="2.22.0")
    _finished_rerun(recorded_trial, environment=other, score=0.9)
    page = page_text(_trial_page(alice_client, recorded_trial))
    assert "Identical val_accuracy: 0.9000 both times." in page
    assert "The environment differed in 3 keys:" in page
    for key, original, rerun in [("devices.kind", "cpu", "gpu"), ("host", "cpu-host-1", "gpu-host-9"),
                                 ("versions.tensorflow", "2.21.0", "2.22.0")]:
        assert (f'<tr data-key="{key}"><th scope="row">{key}</th><td>{original}</td><td>{rerun}</td></tr>') in page


def test_a_rerun_after_the_dataset_or_the_code_changed_says_so(alice_client, acme, recorded_trial, acme_dataset):
    replaced = artifact_create(team=acme, kind=Artifact.Kind.DATASET_ARRAYS, filename="replaced.npz",
                               fileobj=io.BytesIO(b"other splits"))
    Dataset.objects.filter(pk=acme_dataset.pk).update(arrays=replaced)
    before = page_text(_trial_page(alice_client, recorded_trial))
    assert "The dataset&#x27;s stored splits changed since the original trial ran." in before  # said before re-running
    _finished_rerun(recorded_trial, environment=_environment(acme_dataset, dataset__sha256=replaced.sha256,
                                                             hypermodel__source_sha256="0" * 64))
    page = page_text(_trial_page(alice_client, recorded_trial))
    rerun = page[page.index('id="rerun-1"'):]
    assert "The dataset&#x27;s stored splits changed since the original trial ran." in rerun
    assert "The hypermodel&#x27;s code changed since the original trial ran." in rerun


def test_a_failed_rerun_shows_its_reason(alice_client, acme_trial):
    TrialRerun.objects.create(trial=acme_trial, number=1, seed=2, status=TrialRerun.Status.FAILED,
                              error="Training failed: out of patience")
    page = page_text(_trial_page(alice_client, acme_trial))
    assert '<p class="error rerun-error">Training failed: out of patience</p>' in page
    assert 'id="rerun-trial"' in page and 'id="rerun-trial" disabled' not in page


def test_the_live_part_polls_while_a_rerun_runs_and_reloads_the_page_when_it_ends(alice_client, acme_trial):
    rerun = TrialRerun.objects.create(trial=acme_trial, number=1, seed=2, status=TrialRerun.Status.RUNNING,
                                      worker_host="w")
    TrialRerunEpoch.objects.create(rerun=rerun, epoch=0, metrics={"loss": 1.0})
    url = reverse("trial_reruns_live", args=[acme_trial.study_id, acme_trial.pk])
    running = alice_client.get(url, headers={"HX-Request": "true"})
    assert running.status_code == 200 and "training: epoch 1…" in page_text(running)
    assert f'hx-get="{url}"' in page_text(running) and "HX-Refresh" not in running
    TrialRerun.objects.filter(pk=rerun.pk).update(status=TrialRerun.Status.COMPLETED, score=0.9, best_epoch=1)
    ended = alice_client.get(url, headers={"HX-Request": "true"})
    assert ended["HX-Refresh"] == "true"


def test_another_team_gets_404_and_changes_nothing(client, charlie, acme_trial):
    client.force_login(charlie)
    args = [acme_trial.study_id, acme_trial.pk]
    assert client.get(reverse("trial_reruns_live", args=args)).status_code == 404
    assert client.post(reverse("trial_rerun", args=args)).status_code == 404
    assert not TrialRerun.objects.exists()


def test_the_model_page_and_card_carry_the_models_environment(alice_client, acme_model, acme_dataset):
    environment = _environment(acme_dataset, seed=acme_model.seed)
    type(acme_model).objects.filter(pk=acme_model.pk).update(environment=environment)
    page = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    section = page[page.index('id="reproducibility"'):page.index('id="downloads"')]
    assert f'<dd data-env="seed">{acme_model.seed}</dd>' in section and "cpu-host-1" in section
    card = json.loads(b"".join([alice_client.get(reverse("model_card", args=[acme_model.id])).content]))
    assert card["reproducibility"] == environment


def test_a_queued_rerun_counts_as_queued_work_of_its_studys_queue(client, acme_trial):
    from tests.web.test_health_and_metrics import sample, scrape

    before = sample(scrape(client), "tuneboard_queue_depth", queue=acme_trial.study.queue)
    TrialRerun.objects.create(trial=acme_trial, number=1, seed=2)
    assert sample(scrape(client), "tuneboard_queue_depth", queue=acme_trial.study.queue) == before + 1


def test_the_compute_line_says_where_the_trials_rows_were_read_from(alice_client, acme_trial):
    compute = {"backend": "jax", "device_kind": "gpu", "device_names": ["gpu:0"], "replicas": 1,
               "precision": "float32", "jit_compile": "auto", "steps_per_execution": 1, "global_batch_size": 128,
               "jax": "0.10.2", "keras": "3.15.1"}
    for record, said in ((compute | {"input": "device", "memory_fraction": 0.45}, "data on the device"),
                         (compute | {"input": "host"}, "data from the host")):
        Trial.objects.filter(pk=acme_trial.pk).update(compute=record)
        line = page_text(_trial_page(alice_client, acme_trial)).split('class="compute-record">')[1].split("</dd>")[0]
        assert f"global batch 128 · {said}" in line and line.endswith("JAX 0.10.2, Keras 3.15.1")
        assert "45 % of the GPU's memory" in line if record["input"] == "device" else "memory" not in line
