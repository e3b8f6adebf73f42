"""Images, text and sequences end to end on a real worker: upload through the page, a study
with the kind's hypermodel, retrain, ensemble, and a download fed raw input that reproduces
the page's test metric. Also the compute settings: two replicas, mixed bfloat16, a TPU study
on a host without a TPU."""

import csv
import io
import zipfile

import numpy as np
import pytest
from django.db.models import Q
from django.urls import reverse
from PIL import Image
from sklearn.datasets import load_digits

from experiments.datasets.bundled import load_bundled
from experiments.models import Dataset, Study, TrainedModel, Trial
from tests.conftest import wait_for
from tests.integration.helpers import started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

CNN_SMALL_SPACE = [
    {"name": "blocks", "type": "fixed", "value": 1, "parent": None, "parent_values": []},
    {"name": "filters", "type": "int", "min": 8, "max": 16, "step": 8, "sampling": "linear",
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 3e-3, "max": 1e-2, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]
TEXT_SMALL_SPACE = [
    {"name": "encoder", "type": "choice", "values": ["conv1d"], "ordered": False,
     "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "float", "min": 3e-3, "max": 1e-2, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
]
SEQUENCE_SMALL_SPACE = [
    {"name": "layer_type", "type": "choice", "values": ["gru", "conv1d"], "ordered": False,
     "parent": None, "parent_values": []},
    {"name": "units", "type": "int", "min": 8, "max": 16, "step": 8, "sampling": "linear",
     "parent": None, "parent_values": []},
]


def _refreshed(obj):
    obj.refresh_from_db()
    return obj


def _finish(study: Study, worker, timeout: float = 300) -> Study:
    wait_for(lambda: _refreshed(study).status != Study.Status.RUNNING, timeout=timeout,
             what=f"study {study.name} to finish; worker log:\n{worker.log()[-3000:]}")
    return study


def _wait_model(model: TrainedModel, worker) -> TrainedModel:
    wait_for(lambda: not _refreshed(model).is_active, timeout=400,
             what=f"model {model} to finish; worker log:\n{worker.log()[-3000:]}")
    assert model.status == TrainedModel.Status.COMPLETED, model.error
    return model


def _upload(client, name: str, filename: str, data: bytes, **fields) -> Dataset:
    response = client.post(reverse("dataset_upload"), {
        "name": name, "file": _named(filename, data), "kind": "auto", "task": "auto", "horizon": 1,
        "color_mode": "auto", "val_fraction": 0.2, "test_fraction": 0.2, "seed": 0, **fields,
    })
    assert response.status_code == 302, response.content.decode()[-2000:]
    return Dataset.objects.get(name=name)


def _named(filename: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(filename, data)


def _digits_zip(per_class: int = 60, classes=(0, 1, 2)) -> bytes:
    digits = load_digits()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for label in classes:
            images = digits.images[digits.target == label][:per_class]
            for i, image in enumerate(images):
                png = io.BytesIO()
                Image.fromarray((image * 255 / 16).round().astype(np.uint8), mode="L").save(png, format="PNG")
                archive.writestr(f"digits/{label}/{i}.png", png.getvalue())
        archive.writestr("digits/README.txt", "not an image")
    return buffer.getvalue()


def _test_split(dataset: Dataset):
    from experiments.selectors.artifacts import artifact_read_bytes

    with np.load(io.BytesIO(artifact_read_bytes(artifact=dataset.arrays)), allow_pickle=False) as npz:
        return npz["x_test"], npz["y_test"]


def _serving_predictions(client, model: TrainedModel, x, tmp_path):
    import tensorflow as tf

    response = client.get(reverse("model_download", args=[model.id, "savedmodel"]))
    assert response.status_code == 200
    archive = zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content)))
    folder = tmp_path / f"serving-{model.id}"
    archive.extractall(folder)
    serving = tf.saved_model.load(str(folder / model.name / str(model.version))).signatures["serving_default"]
    (input_name,) = serving.structured_input_signature[1]
    (output,) = serving(**{input_name: tf.constant(x)}).values()
    return output.numpy()


def _request_models(client, study: Study, top_n: int, name: str) -> list[TrainedModel]:
    response = client.post(reverse("study_models_request", args=[study.id]), {
        "top_n": top_n, "method": "retrain", "epoch_source": "recorded", "epoch_cap": 5, "name": name,
    })
    assert response.status_code == 302
    # A name given for one trial is its model's; for several, each model is <name>-trial-<number>.
    named = Q(name=name) if top_n == 1 else Q(name__startswith=f"{name}-trial-")
    return list(TrainedModel.objects.filter(named, study=study).order_by("id"))


def test_image_zip_to_cnn_study_retrain_ensemble_and_raw_uint8_serving(
        acme, alice, alice_client, start_worker, tmp_path):
    dataset = _upload(alice_client, "digit images", "digits.zip", _digits_zip())
    assert dataset.kind == "image" and dataset.input_shape == [8, 8, 1]
    assert dataset.class_counts == {"0": 60, "1": 60, "2": 60}
    assert dataset.details["skipped_count"] == 1  # README.txt, reported with its reason
    page = alice_client.get(reverse("dataset_detail", args=[dataset.id])).content.decode()
    assert "README.txt" in page and "8×8×1" in page

    worker = start_worker()
    study = started_study(acme, alice, dataset, name="cnn digits", hypermodel="cnn", search_space=CNN_SMALL_SPACE,
                          max_trials=2, epochs=3, batch_size=32, objective_metric="val_accuracy",
                          objective_direction="max")
    _finish(study, worker)
    assert study.status == Study.Status.COMPLETED, study.message
    trials = list(study.trials.filter(status=Trial.Status.COMPLETED))
    assert len(trials) == 2
    assert trials[0].compute["device_kind"] == "cpu" and trials[0].compute["replicas"] == 1
    assert trials[0].compute["precision"] == "float32"

    models = [_wait_model(m, worker) for m in _request_models(alice_client, study, 2, "cnn-digits")]
    response = alice_client.post(reverse("ensemble_new"), {
        "members": [f"model:{m.id}" for m in models], "method": "nelder_mead", "name": "cnn-pair",
    })
    assert response.status_code == 302
    ensemble = _wait_model(TrainedModel.objects.get(name="cnn-pair"), worker)

    x_test, y_test = _test_split(dataset)
    assert x_test.dtype == np.uint8
    for model in [*models, ensemble]:
        probabilities = _serving_predictions(alice_client, model, x_test, tmp_path)
        accuracy = float((probabilities.argmax(axis=1) == y_test).mean())
        assert accuracy == pytest.approx(model.test_metrics["accuracy"], abs=1e-6)
    card = alice_client.get(reverse("model_card", args=[models[0].id])).json()
    assert "raw uint8" in card["preprocessing"] and card["compute"]["device_kind"] == "cpu"
    assert card["dataset"]["kind"] == "image"


def _reviews_csv() -> bytes:
    parsed = load_bundled("reviews")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["review", "sentiment"])
    for text, label in zip(parsed.x, parsed.y, strict=True):
        writer.writerow([text, parsed.classes[int(label)]])
    return buffer.getvalue().encode()


def test_text_csv_to_text_study_and_raw_string_serving(acme, alice, alice_client, start_worker, tmp_path):
    dataset = _upload(alice_client, "reviews", "reviews.csv", _reviews_csv(), text_column="review",
                      target_column="sentiment")
    assert dataset.kind == "text" and dataset.details["text_column"] == "review"

    worker = start_worker()
    study = started_study(acme, alice, dataset, name="reviews", hypermodel="text", search_space=TEXT_SMALL_SPACE,
                          max_trials=1, epochs=4, batch_size=32, objective_metric="val_accuracy",
                          objective_direction="max")
    _finish(study, worker)
    assert study.status == Study.Status.COMPLETED, study.message
    (model,) = [_wait_model(m, worker) for m in _request_models(alice_client, study, 1, "reviews")]

    x_test, y_test = _test_split(dataset)
    assert x_test.dtype.kind == "U"
    probabilities = _serving_predictions(alice_client, model, x_test, tmp_path)
    accuracy = float((probabilities.argmax(axis=1) == y_test).mean())
    assert accuracy == pytest.approx(model.test_metrics["accuracy"], abs=1e-6)
    assert accuracy > 0.5  # it learned something from the words
    # TFLite cannot hold string preprocessing: the page says why instead of offering a broken file.
    formats = set(model.files.values_list("format", flat=True))
    assert {"keras", "savedmodel"} <= formats and "tflite" not in formats
    page = alice_client.get(reverse("model_detail", args=[model.id])).content.decode()
    assert "not offered" in page and "TFLite" in page


def test_sequence_npz_and_windowed_time_series_csv_each_run_a_study(acme, alice, alice_client, start_worker):
    waves = load_bundled("waves")
    buffer = io.BytesIO()
    np.savez(buffer, x=waves.x[:240], y=waves.y[:240])
    npz = _upload(alice_client, "waves", "waves.npz", buffer.getvalue())
    assert npz.kind == "sequence" and npz.task == "classification"

    t = np.arange(400)
    rng = np.random.default_rng(0)
    series = io.StringIO()
    series.write("temperature,load\n")
    for step in t:
        series.write(f"{np.sin(step / 8) + rng.normal(0, 0.05):.4f},{np.cos(step / 8):.4f}\n")
    csv_dataset = _upload(alice_client, "sensor", "sensor.csv", series.getvalue().encode(),
                          target_column="temperature", window=16, horizon=2)
    assert csv_dataset.kind == "sequence" and csv_dataset.task == "regression"
    assert csv_dataset.input_shape == [16, 2]

    worker = start_worker()
    studies = [
        started_study(acme, alice, npz, name="waves", hypermodel="sequence", search_space=SEQUENCE_SMALL_SPACE,
                      max_trials=2, epochs=2, batch_size=32, objective_metric="val_accuracy",
                      objective_direction="max"),
        started_study(acme, alice, csv_dataset, name="sensor", hypermodel="sequence",
                      search_space=SEQUENCE_SMALL_SPACE, max_trials=2, epochs=2, batch_size=32,
                      objective_metric="val_loss", objective_direction="min"),
    ]
    for study in studies:
        _finish(study, worker)
        assert study.status == Study.Status.COMPLETED, study.message
        assert study.trials.filter(status=Trial.Status.COMPLETED).count() == 2


def _promote_best(client, study: Study, name: str, worker) -> TrainedModel:
    response = client.post(reverse("study_models_request", args=[study.id]), {
        "top_n": 1, "method": "promote", "epoch_source": "recorded", "epoch_cap": 5, "name": name,
    })
    assert response.status_code == 302
    return _wait_model(TrainedModel.objects.get(study=study, name=name), worker)


def test_two_replicas_and_mixed_bfloat16_trials_complete_and_export(acme, alice, alice_client, start_worker,
                                                                      tmp_path):
    import keras

    from tests.integration.helpers import DENSE_SMALL_SPACE, digits

    dataset = digits(acme, alice)
    # The child splits its CPU in two logical devices before TensorFlow starts.
    worker = start_worker(env={"TUNEBOARD_CPU_DEVICES": "2"})
    mirrored = started_study(acme, alice, dataset, name="mirrored", hypermodel="dense",
                             search_space=DENSE_SMALL_SPACE, max_trials=1, epochs=2, batch_size=32,
                             devices_per_trial=2)
    bfloat16 = started_study(acme, alice, dataset, name="bf16", hypermodel="dense", search_space=DENSE_SMALL_SPACE,
                             max_trials=1, epochs=2, batch_size=32, precision="mixed_bfloat16",
                             steps_per_execution=4)
    for study in (mirrored, bfloat16):
        _finish(study, worker)
        assert study.status == Study.Status.COMPLETED, study.message
    (replicated,) = mirrored.trials.all()
    assert replicated.compute["replicas"] == 2 and len(replicated.compute["device_names"]) == 2
    assert replicated.compute["global_batch_size"] == 64
    (mixed,) = bfloat16.trials.all()
    assert mixed.compute["precision"] == "mixed_bfloat16" and mixed.compute["steps_per_execution"] == 4

    for study in (mirrored, bfloat16):
        model = _promote_best(alice_client, study, f"{study.name}-model", worker)
        assert model.compute["precision"] == study.precision
        response = alice_client.get(reverse("model_download", args=[model.id, "keras"]))
        path = tmp_path / f"{model.name}.keras"
        path.write_bytes(b"".join(response.streaming_content))
        x_test, y_test = _test_split(dataset)
        reloaded = keras.models.load_model(path)  # under the default float32 policy
        metrics = reloaded.evaluate(x_test, y_test, return_dict=True, verbose=0)
        assert metrics["accuracy"] == pytest.approx(model.test_metrics["accuracy"], abs=0.02)


def test_a_tpu_study_on_a_host_without_a_tpu_fails_its_trials_with_a_reason(acme, alice, start_worker):
    from tests.integration.helpers import TINY_SPACE, digits

    worker = start_worker(queues="tpu")
    study = started_study(acme, alice, digits(acme, alice), name="tpu", queue="tpu", search_space=TINY_SPACE,
                          max_trials=2, max_consecutive_failed_trials=5)
    _finish(study, worker)
    failed = list(study.trials.all())
    assert len(failed) == 2 and {t.status for t in failed} == {Trial.Status.FAILED}
    assert all("no TPU" in t.error for t in failed), [t.error for t in failed]
    assert study.status in (Study.Status.COMPLETED, Study.Status.FAILED)
