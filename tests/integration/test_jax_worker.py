"""Keras on JAX, on a worker where TensorFlow cannot be imported: a study of each data kind's
default hypermodel that builds on JAX (tabular on two devices with DataParallel, images, sequences),
the best retrained, a Nelder–Mead ensemble, then a TensorFlow worker making the SavedModel
from the `.keras` file, which reproduces the page's test metric. Routing: JAX studies run only
on the JAX worker, TensorFlow ones only on the TensorFlow worker, with the same proposals for
the same seed; a worker refuses the other backend's queues."""

import io
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from experiments.datasets.bundled import load_bundled
from experiments.models import Study, TrainedModel, Trial, Worker
from tests.conftest import wait_for
from tests.integration.helpers import DENSE_SMALL_SPACE, digits, started_study
from tests.integration.test_data_kinds import (
    CNN_SMALL_SPACE,
    SEQUENCE_SMALL_SPACE,
    _digits_zip,
    _finish,
    _request_models,
    _serving_predictions,
    _test_split,
    _upload,
    _wait_model,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

ROOT = Path(__file__).resolve().parents[2]
NO_TENSORFLOW = ROOT / "tests" / "fixtures" / "no_tensorflow"
# Two XLA CPU devices per child, for the DataParallel study.
JAX_WORKER = {"KERAS_BACKEND": "jax", "PYTHONPATH": f"{NO_TENSORFLOW}:{ROOT}", "TUNEBOARD_CPU_DEVICES": "2"}


def _waves(client):
    waves = load_bundled("waves")
    buffer = io.BytesIO()
    np.savez(buffer, x=waves.x[:240], y=waves.y[:240])
    return _upload(client, "waves", "waves.npz", buffer.getvalue())


def test_a_jax_worker_without_tensorflow_searches_retrains_and_ensembles_then_tensorflow_converts(
        acme, alice, alice_client, start_worker, tmp_path):
    tabular = digits(acme, alice)
    images = _upload(alice_client, "digit images", "d.zip", _digits_zip())
    sequences = _waves(alice_client)
    jax_worker = start_worker("jax", queues="cpu-jax", env=JAX_WORKER)
    tf_worker = start_worker("tf", queues="cpu")
    common = {"epochs": 2, "batch_size": 32, "objective_metric": "val_accuracy", "objective_direction": "max"}
    dense = started_study(acme, alice, tabular, name="dense jax", hypermodel="dense", backend="jax",
                          search_space=DENSE_SMALL_SPACE, max_trials=2, devices_per_trial=2, **common)
    twin = started_study(acme, alice, tabular, name="dense tf", hypermodel="dense", search_space=DENSE_SMALL_SPACE,
                         max_trials=2, **common)
    cnn = started_study(acme, alice, images, name="cnn jax", hypermodel="cnn", backend="jax",
                        search_space=CNN_SMALL_SPACE, max_trials=2, **common)
    sequence = started_study(acme, alice, sequences, name="sequence jax", hypermodel="sequence", backend="jax",
                             search_space=SEQUENCE_SMALL_SPACE, max_trials=1, **common)
    for study, worker in ((dense, jax_worker), (cnn, jax_worker), (sequence, jax_worker), (twin, tf_worker)):
        _finish(study, worker)
        assert study.status == Study.Status.COMPLETED, study.message
        trials = list(study.trials.order_by("number"))
        assert {t.status for t in trials} == {Trial.Status.COMPLETED}, [t.error for t in trials]
        backend = "jax" if study.backend == "jax" else "tensorflow"
        assert all(t.compute["backend"] == backend and backend in t.compute for t in trials)
        # Each backend's jobs reach only its own workers.
        assert all(t.worker_name.startswith("jax@" if backend == "jax" else "tf@") for t in trials)
    (replicated, *_) = dense.trials.all()
    assert replicated.compute["replicas"] == 2 and replicated.compute["global_batch_size"] == 64
    # The tuner proposes from the seed alone: the same configurations whichever backend trains them.
    assert [t.hyperparameters for t in dense.trials.order_by("number")] == \
        [t.hyperparameters for t in twin.trials.order_by("number")]
    fleet = {w.name.partition("@")[0]: w.backend for w in Worker.objects.all()}
    assert fleet == {"jax": "jax", "tf": "tensorflow"}
    assert ">jax<" in alice_client.get(reverse("worker_list")).content.decode()

    models = [_wait_model(m, jax_worker) for m in _request_models(alice_client, cnn, 2, "cnn-jax")]
    assert all(m.compute["backend"] == "jax" and m.worker_host for m in models)
    response = alice_client.post(reverse("ensemble_new"), {
        "members": [f"model:{m.id}" for m in models], "method": "nelder_mead", "name": "cnn-jax-pair"})
    assert response.status_code == 302
    ensemble = _wait_model(TrainedModel.objects.get(name="cnn-jax-pair"), jax_worker)
    x_test, y_test = _test_split(images)
    for model in [*models, ensemble]:
        # Trained without TensorFlow: the .keras file at once, the rest from the TensorFlow worker.
        wait_for(lambda m=model: {"keras", "savedmodel", "tflite"} <= set(m.files.values_list("format", flat=True)),
                 timeout=300, what=f"the conversion of {model}; TF worker log:\n{tf_worker.log()[-3000:]}")
        probabilities = _serving_predictions(alice_client, model, x_test, tmp_path)
        accuracy = float((probabilities.argmax(axis=1) == y_test).mean())
        assert accuracy == pytest.approx(model.test_metrics["accuracy"], abs=1e-6)


def test_a_worker_refuses_the_queues_of_the_other_backend(worker_env, start_worker):
    jax_on_tensorflow_queue = start_worker("wrong", queues="cpu", env=JAX_WORKER)
    assert jax_on_tensorflow_queue.exited_within(60), jax_on_tensorflow_queue.log()[-2000:]
    assert "queue 'cpu' holds tensorflow jobs, but this worker runs jax" in jax_on_tensorflow_queue.log()
