"""Serving exports end to end: real SavedModels of tiny trained models, written in TF Serving's
layout, load with tf.saved_model.load and reproduce each model's test metric; on a real Celery
worker, an export runs when requested and again when an alias moves, and the second rewrites
only models.config."""

import numpy as np
import pytest
import tensorflow as tf

from experiments.models import ServingExport
from experiments.services.datasets import dataset_create_bundled
from experiments.services.serving_exports import serving_export_request
from tests.conftest import wait_for
from tests.fixtures.registry_rows import move_alias, parsed_config, register, savedmodel_zip_bytes, trained_model
from workers.jobs.serving_exports import export_serving

pytestmark = pytest.mark.django_db(transaction=True)
RNG = np.random.default_rng(5)
X_TRAIN, X_TEST = RNG.normal(size=(96, 4)).astype("float32"), RNG.normal(size=(32, 4)).astype("float32")
Y_TRAIN, Y_TEST = (X_TRAIN[:, 0] > X_TRAIN[:, 1]).astype("int64"), (X_TEST[:, 0] > X_TEST[:, 1]).astype("int64")


def tiny_savedmodel(tmp_path, seed: int, units: int) -> tuple[bytes, float, np.ndarray]:
    """A small classifier trained a few epochs, its SavedModel zip as its worker makes it
    (workers/export/formats.py), its test accuracy and its test predictions."""
    import keras

    from workers.export.formats import export_model

    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(4,), name="features")
    hidden = keras.layers.Dense(units, activation="relu")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(hidden))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(X_TRAIN, Y_TRAIN, epochs=3, batch_size=32, verbose=0)
    predictions = model.predict(X_TEST, verbose=0)
    workdir = tmp_path / f"model-{seed}"
    workdir.mkdir()
    exported = export_model(model, workdir=workdir, name=f"trained-{seed}", version=1, formats=["savedmodel"])
    accuracy = float(np.mean(predictions.argmax(axis=1) == Y_TEST))
    return exported.files["savedmodel"].read_bytes(), accuracy, predictions


def test_each_exported_version_loads_and_reproduces_its_models_test_metric(acme, alice, settings, tmp_path):
    settings.SERVING_DIR = tmp_path / "serving"
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    made = [tiny_savedmodel(tmp_path, seed, units) for seed, units in ((1, 4), (2, 16))]
    models = [trained_model(acme, dataset, f"trained-{i}", savedmodel=zipped, test_metrics={"accuracy": accuracy})
              for i, (zipped, accuracy, _) in enumerate(made, start=1)]
    register(acme, "flags", models, {"production": 2, "staging": 1})
    export = serving_export_request(team=acme, reason="manual")

    assert export_serving(export_pk=export.pk) == "completed"

    folder = settings.SERVING_DIR / f"team-{acme.pk}"
    assert parsed_config(folder) == {"flags": (str(folder / "flags"), [1, 2], {"production": 2, "staging": 1})}
    for version, model, (_, _, predictions) in zip((1, 2), models, made, strict=True):
        serving = tf.saved_model.load(str(folder / "flags" / str(version))).signatures["serving_default"]
        (served,) = serving(input_0=tf.constant(X_TEST)).values()
        np.testing.assert_allclose(served.numpy(), predictions, atol=1e-5)
        assert float(np.mean(served.numpy().argmax(axis=1) == Y_TEST)) == model.test_metrics["accuracy"]


@pytest.mark.worker
def test_a_worker_exports_on_request_and_again_when_an_alias_moves(acme, alice, start_worker, tmp_path):
    serving_dir = tmp_path / "serving"
    worker = start_worker(env={"TUNEBOARD_SERVING_DIR": str(serving_dir), "TUNEBOARD_SERVING_BASE_PATH": "/models"})
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    models = [trained_model(acme, dataset, f"m{i}", savedmodel=savedmodel_zip_bytes(f"m{i}")) for i in (1, 2)]
    registered = register(acme, "flags", models, {"production": 1})

    def finished(export):
        wait_for(lambda: ServingExport.objects.get(pk=export.pk).finished is not None, timeout=120,
                 what=f"serving export {export.pk}; worker log:\n{worker.log()[-3000:]}")
        row = ServingExport.objects.get(pk=export.pk)
        assert row.status == ServingExport.Status.COMPLETED, row.error
        return row

    first = finished(serving_export_request(team=acme, reason="manual", user=alice))
    folder = serving_dir / f"team-{acme.pk}"
    assert first.report["written"] == ["flags/1", "flags/2"] and first.worker_host
    assert parsed_config(folder) == {"flags": ("/models/" + f"team-{acme.pk}/flags", [1, 2], {"production": 1})}
    inodes = {v: (folder / "flags" / v).stat().st_ino for v in ("1", "2")}

    move_alias(registered, "production", 2, user=alice)  # as the registry's alias move does: it queues an export
    second = finished(ServingExport.objects.filter(team=acme).exclude(pk=first.pk).get())

    assert second.reason == "alias:flags@production"
    assert (second.report["written"], second.report["kept"]) == ([], ["flags/1", "flags/2"])
    assert parsed_config(folder)["flags"][2] == {"production": 2}
    assert {v: (folder / "flags" / v).stat().st_ino for v in ("1", "2")} == inodes
