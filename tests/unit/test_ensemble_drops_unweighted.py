"""Served ensembles hold only the members they use: a member whose weight is 0, or so small it
changes nothing (Nelder–Mead's starved members keep weights like 1e-9), is left out of the
exported model and so of every format, which predicts what the full weighted sum predicts."""

import zipfile

import keras
import numpy as np
import tensorflow as tf

from workers.ensembles import blending
from workers.ensembles.keras_models import weighted_average_model
from workers.export.formats import export_model

X = np.random.default_rng(5).normal(size=(32, 4)).astype("float32")


def member(seed: int) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(4,))
    hidden = keras.layers.Dense(64, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(hidden), name="mlp")


def test_negligible_weights_become_zero_and_the_rest_still_sum_to_one():
    pruned = blending.without_negligible(np.array([0.7, 0.3 - 1e-9, 1e-9]))
    assert pruned[2] == 0.0 and pruned.sum() == 1.0 and pruned[0] > 0.7 - 1e-8
    # Weights that matter are kept as they are; all negligible (impossible after a fit) changes nothing.
    assert np.array_equal(blending.without_negligible(np.array([0.5, 0.25, 0.25])), [0.5, 0.25, 0.25])
    assert blending.without_negligible(np.array([0.0, 1e-6]))[1] == 1e-6


def test_an_exported_ensemble_leaves_out_a_zero_weight_member_and_predicts_the_same(tmp_path):
    members = [member(seed) for seed in (1, 2, 3)]
    predictions = np.stack([m.predict(X, verbose=0) for m in members]).astype("float64")
    fitted = np.array([0.6, 0.4 - 1e-9, 1e-9])
    weights = blending.without_negligible(fitted)
    kept = [i for i, w in enumerate(weights) if w > 0]
    assert kept == [0, 1]

    combined = weighted_average_model([members[i] for i in kept], [float(weights[i]) for i in kept], (4,),
                                      positions=kept)
    nested = [layer.name for layer in combined.layers if isinstance(layer, keras.Model)]
    assert nested == ["member_0", "member_1"]
    exported = export_model(combined, workdir=tmp_path, name="ens", version=1, formats=("keras", "savedmodel"))

    # The weighted sum with every member, the member left out included, is what it predicts.
    full = blending.blend(predictions, fitted)
    reloaded = keras.saving.load_model(exported.files["keras"])
    assert [layer.name for layer in reloaded.layers if isinstance(layer, keras.Model)] == ["member_0", "member_1"]
    assert np.max(np.abs(reloaded.predict(X, verbose=0) - full)) < 1e-5
    with zipfile.ZipFile(exported.files["savedmodel"]) as archive:
        archive.extractall(tmp_path / "serving")
    served = tf.saved_model.load(str(tmp_path / "serving" / "ens" / "1")).signatures["serving_default"]
    output = next(iter(served(tf.constant(X)).values())).numpy()
    assert np.max(np.abs(output - full)) < 1e-5
    # Two members' weights, not three: the SavedModel's variables hold 2 x (4*64 + 64 + 64*3 + 3) floats.
    variables = tf.saved_model.load(str(tmp_path / "serving" / "ens" / "1")).variables
    assert sum(int(np.prod(v.shape)) for v in variables) == 2 * (4 * 64 + 64 + 64 * 3 + 3)
