"""GET /scaling/<queue>/ counts the work of one queue from the database, for KEDA."""

import io
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import (
    Artifact,
    ModelConversion,
    ModelVariant,
    NotificationDelivery,
    PredictionJob,
    ServingExport,
    Study,
    TrainedModel,
    Trial,
    TrialRerun,
)
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from experiments.services.notifications import notify_webhook_test
from experiments.services.studies import study_create
from experiments.services.webhooks import webhook_create

TOKEN = "scaling-test-token"
SPACE = [{"name": "units", "type": "int", "min": 4, "max": 16, "step": 4, "sampling": "linear",
          "parent": None, "parent_values": []}]


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("TUNEBOARD_SCALING_TOKEN", TOKEN)
    return TOKEN


def _get(client, queue, token=None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get(reverse("scaling", kwargs={"queue": queue}), headers=headers)


@pytest.fixture
def world(alice, acme):
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")

    def study(name, queue, status, parallelism, max_trials):
        s = study_create(team=acme, user=alice, dataset=dataset, name=name, hypermodel="dense", search_space=SPACE,
                         objective_metric="val_accuracy", objective_direction="max")
        Study.objects.filter(pk=s.pk).update(queue=queue, status=status, parallelism=parallelism,
                                             max_trials=max_trials)
        return Study.objects.get(pk=s.pk)

    def trials(s, *statuses):
        for i, status in enumerate(statuses):
            Trial.objects.create(study=s, trial_id=str(i), number=i + 1, status=status, hyperparameters={})

    # gpu, running: parallelism 3, budget 10, 2 started of which 1 running -> 1 running + 2 free slots
    g1 = study("g1", "gpu", Study.Status.RUNNING, 3, 10)
    trials(g1, Trial.Status.COMPLETED, Trial.Status.RUNNING)
    # gpu, running: parallelism 4 but only 1 trial left in the budget, 1 running -> 0 free slots
    g2 = study("g2", "gpu", Study.Status.RUNNING, 4, 3)
    trials(g2, Trial.Status.COMPLETED, Trial.Status.COMPLETED, Trial.Status.RUNNING)
    # gpu, cancelled with a trial still stopping: counted running, no free slots
    g3 = study("g3", "gpu", Study.Status.CANCELLED, 2, 10)
    trials(g3, Trial.Status.RUNNING)
    # cpu, running, nothing started yet: parallelism 2 -> 2 free slots
    c1 = study("c1", "cpu", Study.Status.RUNNING, 2, 5)

    def model(s, status, kind="single"):
        return TrainedModel.objects.create(team=acme, dataset=dataset, study=s, kind=kind,
                                           name=s.name if s else "blend", version=TrainedModel.objects.count() + 1,
                                           method="retrain", seed=1, status=status)

    model(g1, "queued")
    model(g1, "running")
    model(g1, "running")
    done = model(g1, "completed")
    model(c1, "queued")
    ensemble = model(None, "queued", kind="ensemble")  # ensembles go to ENSEMBLE_QUEUE ("cpu")
    # Re-runs go to their study's queue.
    finished = Trial.objects.filter(study=g1, status=Trial.Status.COMPLETED).first()
    for number, status in enumerate(("queued", "running", "completed"), start=1):
        TrialRerun.objects.create(trial=finished, number=number, seed=1, status=status)
    # Conversions (SavedModel/TFLite from a JAX-trained model's .keras file) go to the cpu queue.
    for status in ("queued", "completed"):
        ModelConversion.objects.create(model=done, formats=["savedmodel"], status=status)
    # Serving exports too.
    for status in ("running", "failed"):
        ServingExport.objects.create(team=acme, status=status)
    # Batch predictions go where their model trained: the gpu study's model, and an ensemble (cpu).
    inputs = artifact_create(team=acme, kind=Artifact.Kind.PREDICTION_INPUTS, filename="x.npz",
                             fileobj=io.BytesIO(b"x"))
    for predicted_by, status in ((done, "queued"), (done, "running"), (done, "completed"), (ensemble, "queued")):
        PredictionJob.objects.create(team=acme, model=predicted_by, inputs=inputs, rows=1, status=status)
    # Quantized variants go to the queue each row names: Keras ones where the model trained, TFLite ones to cpu.
    for method, queue, status in (("keras_int8", "gpu", "queued"), ("tflite_dynamic", "cpu", "running"),
                                  ("tflite_int8_full", "cpu", "completed")):
        ModelVariant.objects.create(model=done, method=method, queue=queue, status=status)
    return acme


@pytest.mark.django_db
def test_counts_per_queue(client, token, world):
    gpu = _get(client, "gpu", token)
    assert gpu.status_code == 200
    assert gpu.json() == {"queue": "gpu", "queued_trials": 2, "running_trials": 3,
                          "queued_models": 1, "running_models": 2, "queued_reruns": 1, "running_reruns": 1,
                          "queued_conversions": 0, "running_conversions": 0, "queued_serving_exports": 0,
                          "running_serving_exports": 0, "queued_predictions": 1, "running_predictions": 1,
                          "queued_variants": 1, "running_variants": 0, "due_deliveries": 0, "work": 13}
    assert _get(client, "cpu", token).json() == {"queue": "cpu", "queued_trials": 2, "running_trials": 0,
                                                 "queued_models": 2, "running_models": 0, "queued_reruns": 0,
                                                 "running_reruns": 0, "queued_conversions": 1,
                                                 "running_conversions": 0, "queued_serving_exports": 0,
                                                 "running_serving_exports": 1, "queued_predictions": 1,
                                                 "running_predictions": 0, "queued_variants": 0,
                                                 "running_variants": 1, "due_deliveries": 0, "work": 8}
    assert _get(client, "tpu", token).json()["work"] == 0


@pytest.mark.django_db
def test_forbidden_without_the_right_token(client, monkeypatch):
    monkeypatch.delenv("TUNEBOARD_SCALING_TOKEN", raising=False)
    assert _get(client, "cpu").status_code == 403
    assert _get(client, "cpu", "anything").status_code == 403  # unset on the server: nobody gets in
    monkeypatch.setenv("TUNEBOARD_SCALING_TOKEN", TOKEN)
    assert _get(client, "cpu").status_code == 403
    assert _get(client, "cpu", "wrong").status_code == 403
    assert _get(client, "cpu", TOKEN).status_code == 200
    assert _get(client, "nope", TOKEN).status_code == 404


@pytest.mark.django_db
def test_due_notification_deliveries_wake_one_cpu_worker(client, token, acme, alice):
    for name in ("a", "b", "c"):
        hook, _ = webhook_create(team=acme, user=alice, name=name, url="https://hooks.example.com/x",
                                 events=["study.completed"])
        notify_webhook_test(webhook=hook, user=alice)
    cpu = _get(client, "cpu", token).json()
    assert (cpu["due_deliveries"], cpu["work"]) == (3, 1)  # one worker sends them all
    assert _get(client, "gpu", token).json()["due_deliveries"] == 0
    NotificationDelivery.objects.update(next_attempt=timezone.now() + timedelta(minutes=5))  # waiting for a retry
    assert _get(client, "cpu", token).json()["work"] == 0
