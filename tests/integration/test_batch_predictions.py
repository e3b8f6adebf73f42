"""Batch predictions on a real worker: the test split's raw inputs (CSV rows, uint8 images,
strings), uploaded without their labels, come back as predictions whose accuracy — computed from
the downloaded CSV — is the model page's test accuracy, for a single model, an ensemble and a
registry alias; a large job reports its progress as it goes and stops when cancelled."""

import csv
import io

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from experiments.models import ModelAlias, ModelVersion, PredictionJob, RegisteredModel, Study
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.datasets import dataset_create_bundled
from experiments.services.ensembles import ensemble_create
from experiments.services.trained_models import trained_models_request
from tests.api.conftest import make_token
from tests.conftest import wait_for
from tests.integration.helpers import started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _fixed(name, value):
    return {"name": name, "type": "fixed", "value": value, "parent": None, "parent_values": []}


DENSE = [_fixed("units", 16), _fixed("num_layers", 1),
         {"name": "learning_rate", "type": "choice", "values": [0.01, 0.03], "ordered": True, "parent": None,
          "parent_values": []}]
CNN = [_fixed("blocks", 1), _fixed("filters", 8), _fixed("learning_rate", 0.01)]
TEXT = [_fixed("encoder", "conv1d"), _fixed("learning_rate", 0.01)]


def _refreshed(obj):
    obj.refresh_from_db()
    return obj


def _done(obj, worker):
    wait_for(lambda: not _refreshed(obj).is_active, timeout=400, what=f"{obj} to finish:\n{worker.log()[-3000:]}")
    assert obj.status == "completed", obj.error
    return obj


def _study_done(study, worker):
    wait_for(lambda: _refreshed(study).status != Study.Status.RUNNING, timeout=400,
             what=f"{study.name} to finish:\n{worker.log()[-3000:]}")
    assert study.status == Study.Status.COMPLETED, study.message
    return study


def _test_split(dataset):
    with np.load(io.BytesIO(artifact_read_bytes(artifact=dataset.arrays)), allow_pickle=False) as npz:
        return npz["x_test"], npz["y_test"]


def _csv(header, rows) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def _npz(x) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, x=x)
    return buffer.getvalue()


def _predicted(api, worker, **fields) -> tuple[PredictionJob, list[dict]]:
    """Ask through the API, wait for the worker, and read the downloaded CSV."""
    filename, data = fields.pop("upload")
    answer = api.post("/api/v1/predictions/", {**fields, "file": SimpleUploadedFile(filename, data)},
                      format="multipart")
    assert answer.status_code == 202, answer.json()
    job = _done(PredictionJob.objects.get(pk=answer.json()["id"]), worker)
    detail = api.get(f"/api/v1/predictions/{job.pk}/").json()
    assert (detail["status"], detail["rows_done"], detail["rows"]) == ("completed", job.rows, job.rows)
    body = b"".join(api.get(detail["downloads"]["csv"]).streaming_content).decode()
    return job, list(csv.DictReader(io.StringIO(body)))


def _accuracy(rows: list[dict], y, classes) -> float:
    return float(np.mean([row["label"] == classes[int(label)] for row, label in zip(rows, y, strict=True)]))


def test_batch_predictions_reproduce_the_test_metric_and_follow_progress_and_cancel(acme, alice, alice_client,
                                                                                    start_worker):
    worker = start_worker()
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    reviews = dataset_create_bundled(team=acme, user=alice, bundled_name="reviews")
    studies = [started_study(acme, alice, iris, name="iris", hypermodel="dense", search_space=DENSE, tuner="grid",
                             max_trials=2, epochs=5, batch_size=16),
               started_study(acme, alice, images, name="images", hypermodel="cnn", search_space=CNN, max_trials=1,
                             epochs=2, batch_size=64),
               started_study(acme, alice, reviews, name="reviews", hypermodel="text", search_space=TEXT,
                             max_trials=1, epochs=3, batch_size=32)]
    models = []
    for study in studies:
        _study_done(study, worker)
        models += trained_models_request(study=study, user=alice, trials=list(study.trials.order_by("number")),
                                         method="promote", name=study.name)
    tabular, second, image_model, text_model = (_done(model, worker) for model in models)
    ensemble = _done(ensemble_create(team=acme, user=alice, members=[tabular, second], method="mean",
                                     name="iris-mean"), worker)
    registered = RegisteredModel.objects.create(team=acme, name="iris", task="classification", dataset_kind="tabular")
    version = ModelVersion.objects.create(registered_model=registered, version=1, trained_model=ensemble)
    ModelAlias.objects.create(registered_model=registered, name="production", version=version)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(alice)}")

    # Rows: the test split as a CSV of its feature columns (no label), by model, ensemble and alias.
    x, y = _test_split(iris)
    table = ("table.csv", _csv(iris.feature_names, [[str(value) for value in row] for row in x]))
    for fields, model in [({"model": tabular.id}, tabular), ({"model": ensemble.id}, ensemble),
                          ({"reference": "iris@production"}, ensemble)]:
        job, rows = _predicted(api, worker, upload=table, **fields)
        assert job.model_id == model.id
        assert _accuracy(rows, y, iris.classes) == pytest.approx(model.test_metrics["accuracy"], abs=1e-6)
        assert set(rows[0]) == {"row", "label", *iris.classes}
        assert sum(float(rows[0][name]) for name in iris.classes) == pytest.approx(1.0, abs=1e-5)
    assert (job.requested_as, job.registry_version_id) == ("iris@production", version.pk)

    # uint8 images as an NPZ, and strings as a CSV of one column.
    x, y = _test_split(images)
    assert x.dtype == np.uint8
    job, rows = _predicted(api, worker, upload=("images.npz", _npz(x)), model=image_model.id)
    assert _accuracy(rows, y, images.classes) == pytest.approx(image_model.test_metrics["accuracy"], abs=1e-6)
    x, y = _test_split(reviews)
    job, rows = _predicted(api, worker, upload=("texts.csv", _csv(reviews.feature_names, [[t] for t in x])),
                           model=text_model.id)
    assert _accuracy(rows, y, reviews.classes) == pytest.approx(text_model.test_metrics["accuracy"], abs=1e-6)
    page = alice_client.get(reverse("prediction_detail", args=[job.pk])).content.decode()
    assert f"{job.rows} / {job.rows} rows" in page and 'id="prediction-preview"' in page
    with np.load(io.BytesIO(artifact_read_bytes(artifact=job.predictions_npz))) as npz:
        assert npz["predictions"].shape == (job.rows, len(reviews.classes))
        assert list(npz["labels"][:3]) == [row["label"] for row in rows[:3]]

    # Progress, then cancel: the worker stops at its next batch and takes the next job.
    many = np.random.default_rng(0).normal(size=(600_000, 4)).astype(np.float32)
    answer = api.post("/api/v1/predictions/", {"model": tabular.id, "file": SimpleUploadedFile("many.npz", _npz(many))},
                      format="multipart")
    job = PredictionJob.objects.get(pk=answer.json()["id"])
    wait_for(lambda: _refreshed(job).rows_done > 0, timeout=120, what=f"progress:\n{worker.log()[-3000:]}")
    assert job.status == "running" and 0 < job.rows_done < job.rows
    assert api.post(f"/api/v1/predictions/{job.pk}/cancel/").json()["status"] == "cancelled"
    _, rows = _predicted(api, worker, upload=table, model=tabular.id)
    job.refresh_from_db()
    assert job.status == "cancelled" and job.rows_done < job.rows and job.predictions_csv_id is None
