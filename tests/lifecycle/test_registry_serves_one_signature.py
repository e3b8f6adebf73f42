"""The issue's case, end to end on the bundled digits_images: a `cnn` model (Keras input `images`)
and a `dense` model (Keras input `features`), trained here for one epoch on a few rows and exported
as workers do, plus their weighted and stacked ensembles, register as versions 1-4 of one name;
the serving export job writes them in TF Serving's layout, and the one REST body the registry
page shows, naming its input, works on every version's SavedModel, as does a batch of real
digits (each version answering what its Keras model predicts)."""

import json

import keras
import keras_tuner as kt
import numpy as np
import pytest
import tensorflow as tf

from experiments.datasets.bundled import load_bundled
from experiments.selectors.registry import registered_model_detail
from experiments.services.datasets import dataset_create_bundled
from experiments.services.registry import registry_alias_set, registry_register
from experiments.services.serving_exports import serving_export_request
from tests.fixtures.registry_rows import trained_model
from workers import hypermodels
from workers.ensembles.keras_models import stacked_model, weighted_average_model
from workers.ensembles.stacking import fit_stacking
from workers.export.formats import export_model
from workers.hypermodels.base import DataInfo
from workers.jobs.serving_exports import export_serving

# The serving export job closes expired connections first, as around each job: outside a test transaction.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def digits():
    parsed = load_bundled("digits_images")
    order = np.random.default_rng(0).permutation(parsed.n_rows)
    return {split: (parsed.x[rows], parsed.y[rows]) for split, rows in
            (("train", order[:300]), ("val", order[300:420]), ("test", order[420:452]))}


def trained(name: str, digits) -> keras.Model:
    keras.utils.set_random_seed(1)
    x, y = digits["train"]
    model = hypermodels.build(name, kt.HyperParameters(), DataInfo.from_training_split(x, "classification", 10,
                                                                                       kind="image"))
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    return model


def stored_version(acme, dataset, name: str, model: keras.Model, workdir) -> object:
    """The model exported as a worker exports it, stored as a completed model with its SavedModel."""
    exported = export_model(model, workdir=workdir, name=name, version=1, formats=("keras", "savedmodel"))
    return trained_model(acme, dataset, name, savedmodel=exported.files["savedmodel"].read_bytes(),
                         signature=exported.signature)


def served(folder, body: dict) -> np.ndarray:
    """TF Serving's columnar REST predict: each named input converted to the signature's dtype."""
    serving = tf.saved_model.load(str(folder)).signatures["serving_default"]
    specs = serving.structured_input_signature[1]
    tensors = {key: tf.constant(np.asarray(value), dtype=specs[key].dtype) for key, value in body["inputs"].items()}
    (output,) = serving(**tensors).values()
    return output.numpy()


def test_cnn_dense_and_their_ensembles_are_versions_one_rest_call_serves(acme, alice, digits, settings, tmp_path):
    settings.SERVING_DIR = tmp_path / "serving"
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    cnn, dense = trained("cnn", digits), trained("dense", digits)
    assert (cnn.inputs[0].name, dense.inputs[0].name) == ("images", "features")
    x_val, y_val = digits["val"]
    stacker = fit_stacking(np.stack([m.predict(x_val, verbose=0) for m in (cnn, dense)]), y_val, "classification",
                           folds=3, feature_kind="probabilities")
    models = {"digits-cnn": cnn, "digits-dense": dense,
              "digits-blend": weighted_average_model([cnn, dense], [0.6, 0.4], (8, 8, 1)),
              "digits-stack": stacked_model([cnn, dense], stacker, (8, 8, 1))}
    x_test, _ = digits["test"]
    expected = [model.predict(x_test, verbose=0) for model in models.values()]

    for number, (name, model) in enumerate(models.items(), start=1):
        (tmp_path / name).mkdir()
        row = stored_version(acme, dataset, name, model, tmp_path / name)
        version = registry_register(team=acme, model=row, name="digits", user=alice)
        assert version.version == number
    registered = version.registered_model
    registry_alias_set(registered=registered, alias="production", version=2, user=alice)
    export = serving_export_request(team=acme, reason="manual")
    assert export_serving(export_pk=export.pk) == "completed"

    detail = registered_model_detail(registered=registered)
    assert detail["contract"] == {"inputs": [{"name": "input_0", "shape": [None, 8, 8, 1], "dtype": "uint8"}],
                                  "outputs": ["output_0"]}
    assert detail["serving"]["path"] == "/v1/models/digits/labels/production:predict"
    page_body, digits_body = json.loads(detail["serving"]["body"]), {"inputs": {"input_0": x_test.tolist()}}
    folder = settings.SERVING_DIR / f"team-{acme.pk}" / "digits"
    for number, keras_predictions in enumerate(expected, start=1):
        assert served(folder / str(number), page_body).shape == (1, 10), f"version {number}"
        np.testing.assert_allclose(served(folder / str(number), digits_body), keras_predictions, atol=1e-5)

