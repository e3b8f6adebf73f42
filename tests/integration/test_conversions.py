"""A conversion run in this process (the worker's code path, TensorFlow installed here; no broker
needed): a model that has only its .keras file, as a JAX worker without TensorFlow leaves it,
gets its SavedModel and TFLite files from that file, and they compute what the Keras model does."""

import importlib.util
import io
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf
from django.urls import reverse
from django.utils import timezone

from experiments.models import Artifact, ModelConversion, ModelFile, TrainedModel, Trial
from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.services import jobs
from experiments.services.artifacts import artifact_create, artifact_create_from_path
from experiments.services.conversions import conversion_request
from experiments.services.datasets import dataset_create_bundled
from experiments.services.job_kinds import JOB_KINDS
from tests.conftest import wait_for
from tests.integration.helpers import saved_study
from workers.jobs.conversions import convert_model

pytestmark = pytest.mark.django_db(transaction=True)
TF_FORMATS = ["savedmodel", "tflite", "tflite_int8"]
X = np.random.default_rng(3).normal(size=(16, 4)).astype("float32")


# Written in a process of its own with the backend asked for: a JAX worker's .keras file, read here by TensorFlow.
WRITER = """
import sys
import keras
import numpy as np
keras.utils.set_random_seed(1)
inputs = keras.Input(shape=(4,), name="features")
scaled = keras.layers.Normalization(mean=[0.5, -1.0, 2.0, 0.0], variance=[1.0, 4.0, 0.25, 2.0])(inputs)
hidden = keras.layers.Dense(8, activation="relu")(scaled)
model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))
model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"])
model.save(sys.argv[1])
np.save(sys.argv[2], model.predict(np.load(sys.argv[3]), verbose=0))
assert keras.backend.backend() == sys.argv[4]
"""


def tiny_keras_file(folder, backend: str = "tensorflow"):
    """A small model's .keras file written on `backend`, and its predictions of X there."""
    np.save(folder / "x.npy", X)
    done = subprocess.run([sys.executable, "-c", WRITER, str(folder / "tiny-v1.keras"), str(folder / "expected.npy"),
                           str(folder / "x.npy"), backend], env={**os.environ, "KERAS_BACKEND": backend},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "tiny-v1.keras", np.load(folder / "expected.npy")


@pytest.fixture
def jax_trained_model(acme, alice):
    """A completed model with only its .keras file, as a worker without TensorFlow leaves it."""
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"), name="s")
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED, score=0.9)
    model = TrainedModel.objects.create(
        team=acme, dataset=study.dataset, study=study, trial=trial, name="tiny", version=1, method="retrain", seed=1,
        status=TrainedModel.Status.COMPLETED, finished=timezone.now(),
        signature={"input_description": {"keras": "float32 feature vectors of length 4"}, "unavailable": {}})
    return model


def attach_keras(model, fileobj_or_path):
    if isinstance(fileobj_or_path, bytes):
        artifact = artifact_create(team=model.team, kind=Artifact.Kind.MODEL, filename="tiny-v1.keras",
                                   fileobj=io.BytesIO(fileobj_or_path))
    else:
        artifact = artifact_create_from_path(team=model.team, kind=Artifact.Kind.MODEL, path=fileobj_or_path)
    ModelFile.objects.create(model=model, format="keras", artifact=artifact)


def stored(model, fmt, tmp_path):
    artifact = model.files.get(format=fmt).artifact
    return artifact_copy_to_path(artifact=artifact, path=tmp_path / artifact.filename)


def tflite_predict(path, batch):
    interpreter = tf.lite.Interpreter(model_path=str(path))
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.resize_tensor_input(given["index"], list(batch.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], batch)
    interpreter.invoke()
    return interpreter.get_tensor(taken["index"])


@pytest.mark.parametrize("backend", [
    "tensorflow",
    pytest.param("jax", marks=pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX not installed")),
])
def test_a_tensorflow_worker_makes_the_savedmodel_and_tflite_files_from_the_keras_file(jax_trained_model, tmp_path,
                                                                                       backend):
    path, expected = tiny_keras_file(tmp_path, backend)
    attach_keras(jax_trained_model, path)
    conversion = conversion_request(model=jax_trained_model, formats=TF_FORMATS)

    assert convert_model(conversion_pk=conversion.pk) == "completed"

    conversion.refresh_from_db()
    assert conversion.status == ModelConversion.Status.COMPLETED, conversion.error
    assert conversion.environment["versions"]["tensorflow"] != "missing"
    model = TrainedModel.objects.get(pk=jax_trained_model.pk)
    assert sorted(model.files.values_list("format", flat=True)) == ["keras", "savedmodel", "tflite", "tflite_int8"]
    assert model.files.get(format="savedmodel").artifact.filename == "tiny-v1-savedmodel.zip"
    assert model.signature["unavailable"] == {}
    assert model.signature["serving"]["inputs"] == [{"name": "input_0", "shape": [None, 4], "dtype": "float32"}]
    assert set(model.signature["input_description"]) == {"keras", *TF_FORMATS}
    # The SavedModel in TF Serving's layout serves what the Keras model predicts.
    with zipfile.ZipFile(stored(model, "savedmodel", tmp_path)) as archive:
        archive.extractall(tmp_path / "serving")
    serving = tf.saved_model.load(str(tmp_path / "serving" / "tiny" / "1")).signatures["serving_default"]
    (served,) = serving(tf.constant(X)).values()
    np.testing.assert_allclose(served.numpy(), expected, atol=1e-6)  # what the model predicted where it trained
    np.testing.assert_allclose(tflite_predict(stored(model, "tflite", tmp_path), X), expected, atol=1e-5)
    np.testing.assert_allclose(tflite_predict(stored(model, "tflite_int8", tmp_path), X), expected, atol=0.05)


def test_the_celery_task_runs_the_conversion_and_a_second_delivery_finds_nothing(jax_trained_model, tmp_path):
    from workers.tasks import convert_model as task

    attach_keras(jax_trained_model, tiny_keras_file(tmp_path)[0])
    conversion = conversion_request(model=jax_trained_model, formats=["savedmodel"])
    assert task.apply(args=[conversion.pk]).get() == "completed"
    assert task.apply(args=[conversion.pk]).get() == "nothing to do"
    assert sorted(jax_trained_model.files.values_list("format", flat=True)) == ["keras", "savedmodel"]


def test_a_keras_file_that_cannot_be_loaded_fails_the_conversion_with_the_reason(jax_trained_model):
    attach_keras(jax_trained_model, b"not a keras archive")
    conversion = conversion_request(model=jax_trained_model, formats=TF_FORMATS)
    assert convert_model(conversion_pk=conversion.pk) == "failed"
    conversion.refresh_from_db()
    assert conversion.status == ModelConversion.Status.FAILED and conversion.error
    model = TrainedModel.objects.get(pk=jax_trained_model.pk)
    assert model.status == TrainedModel.Status.COMPLETED  # the .keras file stays downloadable
    assert list(model.files.values_list("format", flat=True)) == ["keras"]


def test_a_model_without_a_keras_file_fails_its_conversion_saying_so(jax_trained_model):
    conversion = conversion_request(model=jax_trained_model, formats=TF_FORMATS)
    assert convert_model(conversion_pk=conversion.pk) == "failed"
    conversion.refresh_from_db()
    assert conversion.error == "Model tiny v1 has no .keras file to make the other formats from."


@pytest.mark.worker
def test_a_real_worker_of_the_cpu_queue_picks_up_a_model_completed_without_tensorflow(jax_trained_model, tmp_path,
                                                                                       start_worker, alice_client):
    """The whole route: the completion of a model that lacks its TensorFlow formats sends the
    conversion to the cpu queue, a TensorFlow worker process makes them, the page follows."""
    from experiments.services.trained_models import model_complete

    path, _ = tiny_keras_file(tmp_path)
    TrainedModel.objects.filter(pk=jax_trained_model.pk).update(status=TrainedModel.Status.QUEUED)
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=jax_trained_model.pk, worker_host="jax-host").attempts
    keras_file = artifact_create_from_path(team=jax_trained_model.team, kind=Artifact.Kind.MODEL, path=path)
    worker = start_worker("tf", queues="cpu")
    assert model_complete(model_pk=jax_trained_model.pk, attempt=attempt, best_epoch=1, epochs=1, val_metrics={},
                          test_metrics={}, signature={"unavailable": {}}, versions={}, files={"keras": keras_file},
                          duration_seconds=1.0, pending_formats=TF_FORMATS)
    conversion = ModelConversion.objects.get(model=jax_trained_model)
    wait_for(lambda: not ModelConversion.objects.get(pk=conversion.pk).is_active, timeout=240,
             what=f"the conversion; worker log:\n{worker.log()[-3000:]}")
    conversion.refresh_from_db()
    assert conversion.status == ModelConversion.Status.COMPLETED, conversion.error
    assert conversion.worker_host and conversion.attempts == 1
    assert set(jax_trained_model.files.values_list("format", flat=True)) == {"keras", *TF_FORMATS}
    page = alice_client.get(reverse("model_detail", args=[jax_trained_model.id])).content.decode()
    assert 'data-status="completed"' in page
    assert reverse("model_download", args=[jax_trained_model.id, "tflite"]) in page
