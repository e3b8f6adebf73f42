"""A saved ensemble names no module of Tuneboard's: both kinds of ensemble model are built from
Keras's own layers, so their `.keras` files record only Keras modules and still load after
Tuneboard's worker code moves (workers/ensembles/keras_models.py)."""

import json
import zipfile

import keras
import numpy as np
import pytest

from workers.ensembles.keras_models import stacked_model, weighted_average_model
from workers.ensembles.stacking import fit_stacking


def _member(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(4,))
    hidden = keras.layers.Dense(5, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden))


def _modules(config) -> set[str]:
    if isinstance(config, dict):
        found = {config["module"]} if isinstance(config.get("module"), str) else set()
        return found.union(*(_modules(value) for value in config.values()))
    if isinstance(config, list):
        return set().union(*(_modules(value) for value in config))
    return set()


def _ensembles() -> dict:
    x = np.random.default_rng(0).random((60, 4), dtype="float32")
    y = np.arange(60) % 3
    members = [_member(1), _member(2)]
    predictions = np.stack([member.predict(x, verbose=0) for member in members]).astype("float64")
    stacker = fit_stacking(predictions, y, "classification", feature_kind="log_probabilities")
    return {"weighted": weighted_average_model(members, [0.5, 0.5], (4,)),
            "stacked": stacked_model([_member(1), _member(2)], stacker, (4,))}


@pytest.mark.parametrize("kind", ["weighted", "stacked"])
def test_a_saved_ensemble_records_only_keras_modules_and_loads_in_safe_mode(kind, tmp_path):
    model = _ensembles()[kind]
    path = tmp_path / f"{kind}.keras"
    model.save(path)
    modules = _modules(json.loads(zipfile.ZipFile(path).read("config.json")))
    assert modules and all(module == "keras" or module.startswith("keras.") for module in modules)
    assert keras.models.load_model(path, safe_mode=True).count_params() == model.count_params()
