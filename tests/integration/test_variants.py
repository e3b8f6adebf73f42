"""Quantized variants made in this process (the worker's code path; TensorFlow installed here, no broker
needed): each variant of a real model is measured beside its float model, and its stored file, reloaded,
gives the metric the page shows; the full-integer file holds only integer tensors in its ops and was
calibrated on training rows only."""

import io

import keras
import numpy as np
import pytest
from django.urls import reverse

from experiments.models import ModelVariant
from experiments.selectors.artifacts import artifact_copy_to_path, artifact_read_bytes
from experiments.services.variants import FULL_INTEGER_METHODS, VariantRequestError, variant_request
from tests.conftest import wait_for
from tests.integration.test_conversions import attach_keras, jax_trained_model, tiny_keras_file  # noqa: F401
from tests.integration.test_jax_worker import JAX_WORKER
from workers.export import quantization
from workers.export.variants import prediction_metrics
from workers.jobs.variants import quantize_model
from workers.training.dataset_cache import load_dataset

pytestmark = pytest.mark.django_db(transaction=True)
Method = ModelVariant.Method


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory):
    """Written once: each writing starts a Python process that imports Keras (~5 s)."""
    return tiny_keras_file(tmp_path_factory.mktemp("tiny"))[0]


@pytest.fixture
def model(jax_trained_model, keras_file):  # noqa: F811
    attach_keras(jax_trained_model, keras_file)
    return jax_trained_model


def _reloaded_metrics(variant, model, tmp_path) -> dict:
    path = artifact_copy_to_path(artifact=variant.artifact, path=tmp_path / variant.artifact.filename)
    data, info = load_dataset(model.dataset)
    if variant.is_tflite:
        runner = quantization.TfliteRunner(path.read_bytes())
        assert runner.name == variant.runtime, "scored by the interpreter the page names"
        outputs = runner(data.x_test)
    else:
        assert variant.runtime == "Keras"
        outputs = keras.saving.load_model(path, compile=False).predict(data.x_test, verbose=0)
    return prediction_metrics(outputs, data.y_test, task=info.task, n_classes=info.n_classes)


@pytest.mark.parametrize("method", Method.values)
def test_each_variant_is_measured_beside_its_float_model_and_reloads_with_the_same_test_metric(
        model, method, tmp_path):
    variant = variant_request(model=model, method=method)
    assert quantize_model(variant_pk=variant.pk) == "completed"
    variant.refresh_from_db()
    assert variant.status == ModelVariant.Status.COMPLETED, variant.error
    made, base = variant.figures["variant"], variant.figures["float"]
    assert set(made) == set(base) == {"metrics", "size_bytes", "latency_ms_batch1", "latency_ms_batch64"}
    assert set(made["metrics"]) == {"accuracy", "log_loss"}
    assert made["size_bytes"] == variant.artifact.size
    assert 0 < made["latency_ms_batch64"] and 0 < made["latency_ms_batch1"]
    reloaded = _reloaded_metrics(variant, model, tmp_path)
    assert reloaded["accuracy"] == made["metrics"]["accuracy"]
    assert reloaded["log_loss"] == pytest.approx(made["metrics"]["log_loss"], rel=1e-5)
    if variant.is_tflite:
        assert variant.queue == "cpu"
    if method in FULL_INTEGER_METHODS:
        path = artifact_copy_to_path(artifact=variant.artifact, path=tmp_path / "full.tflite")
        assert quantization.float_tensors_in_ops(path.read_bytes()) == []


def test_the_full_integer_file_is_calibrated_on_training_rows_only(model, monkeypatch):
    seen = []
    original = quantization.calibration_rows
    monkeypatch.setattr(quantization, "calibration_rows",
                        lambda x_train, **kwargs: seen.append(rows := original(x_train, **kwargs)) or rows)
    variant = variant_request(model=model, method=Method.TFLITE_FULL_INTEGER)
    assert quantize_model(variant_pk=variant.pk) == "completed"
    data, _ = load_dataset(model.dataset)
    (rows,) = seen
    train = {row.tobytes() for row in data.x_train}
    held_out = {row.tobytes() for row in np.concatenate([data.x_val, data.x_test])} - train
    assert len(rows) and all(row.tobytes() in train for row in rows)
    assert not any(row.tobytes() in held_out for row in rows), "no validation or test row calibrates it"


def test_a_second_request_returns_the_variant_and_a_model_still_training_is_refused_saying_why(
        jax_trained_model):  # noqa: F811
    model = jax_trained_model
    attach_keras(model, b"PK")
    first = variant_request(model=model, method=Method.KERAS_INT8)
    assert variant_request(model=model, method=Method.KERAS_INT8).pk == first.pk
    model.status = model.Status.RUNNING
    model.save(update_fields=["status"])
    with pytest.raises(VariantRequestError, match="has not finished training"):
        variant_request(model=model, method=Method.TFLITE_DYNAMIC)
    assert ModelVariant.objects.filter(model=model).count() == 1


def test_a_variant_that_cannot_be_made_fails_with_the_reason(jax_trained_model):  # noqa: F811
    model = jax_trained_model
    variant = ModelVariant.objects.create(model=model, method=Method.KERAS_INT8, queue="cpu")
    assert quantize_model(variant_pk=variant.pk) == "failed"
    variant.refresh_from_db()
    assert "has no .keras file to quantize" in variant.error


def test_a_registered_keras_variant_exports_to_the_tf_serving_layout_and_serves_its_own_figures(
        model, alice, settings, tmp_path):
    """A Keras variant made where TensorFlow is carries a SavedModel; registered, TF Serving's folder holds it and
    it reproduces the variant's test metric (not the float model's); a TFLite variant registers but is not served,
    with the reason."""
    import tensorflow as tf

    from experiments.selectors.serving_exports import serving_plan
    from experiments.services.registry import RegistryError, registry_register
    from experiments.services.serving_exports import serving_export_request
    from tests.web.registry_rows import signature
    from workers.jobs.serving_exports import export_serving

    settings.SERVING_DIR = tmp_path / "serving"
    type(model).objects.filter(pk=model.pk).update(signature=signature())
    model.refresh_from_db()
    made = {}
    for method in (Method.KERAS_INT8, Method.TFLITE_DYNAMIC):
        variant = variant_request(model=model, method=method)
        assert quantize_model(variant_pk=variant.pk) == "completed"
        made[method] = ModelVariant.objects.get(pk=variant.pk)
    assert made[Method.KERAS_INT8].saved_model is not None and made[Method.TFLITE_DYNAMIC].saved_model is None
    first = registry_register(team=model.team, model=model, name="tiny", user=alice,
                              variant_id=made[Method.KERAS_INT8].pk)
    with pytest.raises(RegistryError, match="is already version 1 of tiny"):
        registry_register(team=model.team, model=model, name="tiny", user=alice,
                          variant_id=made[Method.KERAS_INT8].pk)
    registry_register(team=model.team, model=model, name="tiny", user=alice, variant_id=made[Method.TFLITE_DYNAMIC].pk)
    registry_register(team=model.team, model=model, name="tiny", user=alice)  # the float model beside them
    (plan,) = serving_plan(team=model.team)
    assert [bool(v.artifact) for v in plan.versions] == [True, False, False]
    assert plan.versions[1].missing.startswith("A TFLite variant: TF Serving serves SavedModels")
    export = serving_export_request(team=model.team, reason="manual")
    assert export_serving(export_pk=export.pk) == "completed"
    folder = settings.SERVING_DIR / f"team-{model.team_id}" / "tiny" / str(first.version)
    serving = tf.saved_model.load(str(folder)).signatures["serving_default"]
    data, info = load_dataset(model.dataset)
    (served,) = serving(tf.constant(data.x_test.astype("float32"))).values()
    metrics = prediction_metrics(served.numpy(), data.y_test, task=info.task, n_classes=info.n_classes)
    assert metrics == pytest.approx(made[Method.KERAS_INT8].figures["variant"]["metrics"], rel=1e-5)


@pytest.mark.parametrize("method", [Method.TFLITE_INTEGER_IO, Method.KERAS_INT8])
def test_a_batch_prediction_with_a_variant_gives_the_variants_outputs(model, alice, method, tmp_path):
    from experiments.datasets.inputs import ModelInputs
    from experiments.models import PredictionJob
    from experiments.services.predictions import prediction_request
    from workers.jobs.predictions import predict_batch

    variant = variant_request(model=model, method=method)
    assert quantize_model(variant_pk=variant.pk) == "completed"
    variant.refresh_from_db()
    data, _ = load_dataset(model.dataset)
    job = prediction_request(team=model.team, user=alice, model=model, inputs=ModelInputs(x=data.x_test),
                             filename="x.npz", variant=variant)
    assert predict_batch(prediction_pk=job.pk) == "completed"
    job = PredictionJob.objects.get(pk=job.pk)
    with np.load(io.BytesIO(artifact_read_bytes(artifact=job.predictions_npz))) as npz:
        predicted = npz["predictions"]
    path = artifact_copy_to_path(artifact=variant.artifact, path=tmp_path / variant.artifact.filename)
    expected = (quantization.TfliteRunner(path.read_bytes())(data.x_test) if variant.is_tflite
                else keras.saving.load_model(path, compile=False).predict(data.x_test, verbose=0))
    np.testing.assert_allclose(predicted, expected, atol=1e-6)
    assert job.rows_done == len(data.x_test)


@pytest.mark.worker
def test_a_jax_worker_quantizes_a_jax_model_with_keras_and_a_tensorflow_worker_makes_its_tflite_variant(
        jax_trained_model, tmp_path, start_worker, alice_client):  # noqa: F811
    """The whole route from the page: each variant goes to the queue its method needs, a worker process there
    makes and measures it, and the page shows it beside the float model with its download."""
    model = jax_trained_model
    type(model.study).objects.filter(pk=model.study_id).update(backend="jax")
    attach_keras(model, tiny_keras_file(tmp_path, "jax")[0])
    workers = [start_worker("jax", queues="cpu-jax", env=JAX_WORKER), start_worker("tf", queues="cpu")]
    for method in ("keras_int8", "tflite_int8_full"):
        alice_client.post(reverse("model_variant_request", args=[model.id]), {"method": method})
    wait_for(lambda: not any(v.is_active for v in ModelVariant.objects.all()), timeout=240,
             what="the variants; worker logs:\n" + "\n".join(w.log()[-2000:] for w in workers))
    made = {v.method: v for v in ModelVariant.objects.all()}
    assert {method: (v.status, v.queue) for method, v in made.items()} == {
        "keras_int8": ("completed", "cpu-jax"), "tflite_int8_full": ("completed", "cpu")}, \
        {m: v.error for m, v in made.items()}
    page = alice_client.get(reverse("model_detail", args=[model.id])).content.decode()
    for variant in made.values():
        assert reverse("model_variant_download", args=[model.id, variant.id]) in page
        assert _reloaded_metrics(variant, model, tmp_path) == pytest.approx(variant.figures["variant"]["metrics"])
