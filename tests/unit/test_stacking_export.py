"""A stacked ensemble ships as one ordinary Keras model (workers/ensembles/keras_models.py): two tiny
Keras classifiers on digits, a stacker fitted on their validation predictions (on
probabilities, and on log-probabilities computed from the members' logits), and the
exported model reproducing the stacker's test predictions, accuracy and log loss in every
format: `.keras` loaded in safe mode with no custom objects, the SavedModel's serving
signature, and TFLite."""

import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

from workers.ensembles import blending
from workers.ensembles.keras_models import has_softmax_head, stacked_model
from workers.ensembles.stacking import fit_stacking
from workers.export.formats import export_model

TOLERANCE = 1e-5


def tiny_classifier(seed: int, hidden: int, x: np.ndarray, y: np.ndarray) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = keras.Input(shape=(64,), name="pixels")
    z = keras.layers.Rescaling(1 / 16)(inputs)
    z = keras.layers.Dense(hidden, activation="relu")(z)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax", name="probabilities")(z), name="mlp")
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=3, batch_size=64, verbose=0)
    return model


@pytest.fixture(scope="module")
def digits_stack():
    x, y = load_digits(return_X_y=True)
    x = x.astype("float32")
    order = np.random.default_rng(0).permutation(len(y))
    train, val, test = order[:600], order[600:1000], order[1000:1300]
    # Deliberately different (and weak) members, so the meta-learner has something to do.
    members = [tiny_classifier(1, 8, x[train], y[train]), tiny_classifier(2, 4, x[train][:300], y[train][:300])]
    val_predictions = np.stack([m.predict(x[val], verbose=0) for m in members]).astype("float64")
    test_predictions = np.stack([m.predict(x[test], verbose=0) for m in members]).astype("float64")
    stackers = {kind: fit_stacking(val_predictions, y[val], "classification", feature_kind=kind)
                for kind in ("probabilities", "log_probabilities")}
    return members, stackers, x[test], y[test], test_predictions


def tflite_predict(path, batch: np.ndarray) -> np.ndarray:
    interpreter = tf.lite.Interpreter(model_path=str(path))
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    interpreter.resize_tensor_input(given["index"], list(batch.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], batch)
    interpreter.invoke()
    return interpreter.get_tensor(taken["index"])


@pytest.mark.parametrize("kind", ["probabilities", "log_probabilities"])
def test_the_exported_stacker_reproduces_the_stackers_test_figures_in_every_format(digits_stack, kind, tmp_path):
    members, stackers, x_test, y_test, test_predictions = digits_stack
    stacker = stackers[kind]
    expected = stacker.predict(test_predictions)
    figures = blending.metrics(expected, y_test, "classification")

    model = stacked_model(members, stacker, (64,), "classification")
    assert np.max(np.abs(model.predict(x_test, verbose=0) - expected)) < TOLERANCE
    exported = export_model(model, workdir=tmp_path, name="stack", version=1)
    assert {"keras", "savedmodel", "tflite"} <= set(exported.files)

    reloaded = keras.models.load_model(exported.files["keras"])  # safe mode, no custom objects
    assert not [layer for layer in reloaded.layers if isinstance(layer, keras.layers.Lambda)]
    with zipfile.ZipFile(exported.files["savedmodel"]) as archive:
        archive.extractall(tmp_path / "serving")
    serving = tf.saved_model.load(str(tmp_path / "serving" / "stack" / "1")).signatures["serving_default"]
    outputs = {
        "keras": reloaded.predict(x_test, verbose=0),
        "savedmodel": next(iter(serving(tf.constant(x_test)).values())).numpy(),
        "tflite": tflite_predict(exported.files["tflite"], x_test),
    }
    for fmt, output in outputs.items():
        assert np.max(np.abs(output - expected)) < TOLERANCE, fmt
        got = blending.metrics(output.astype("float64"), y_test, "classification")
        assert got["accuracy"] == figures["accuracy"], fmt
        assert got["log_loss"] == pytest.approx(figures["log_loss"], abs=1e-5), fmt


def test_a_stacked_model_is_concatenate_and_one_dense_on_the_members(digits_stack):
    members, stackers, *_ = digits_stack
    stacker = stackers["probabilities"]
    model = stacked_model(members, stacker, (64,), "classification")
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds == ["InputLayer", "Functional", "Functional", "Concatenate", "Dense"]
    kernel, bias = model.get_layer("meta_learner").get_weights()
    assert kernel.shape == (20, 10) and np.allclose(kernel, stacker.coef.T, atol=1e-6)
    assert [layer.name for layer in model.layers[1:3]] == ["member_0", "member_1"]


def test_log_probabilities_are_clipped_like_the_stacker_clips_them(tmp_path):
    """Members so confident that float32 probabilities underflow to 0: the exported
    log-probabilities floor at log(1e-15), as workers.ensembles.stacking's features do, so the exported
    model still reproduces the stacker."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 4)).astype("float32")
    y = np.argmax(x[:, :3], axis=1)
    members = []
    for seed, scale in ((1, 200.0), (2, 1.0)):
        keras.utils.set_random_seed(seed)
        inputs = keras.Input(shape=(4,))
        head = keras.layers.Dense(3, activation="softmax", name="probabilities")
        members.append(keras.Model(inputs, head(inputs), name="m"))
        head.set_weights([np.eye(4, 3).astype("float32") * scale, np.zeros(3, "float32")])
    predictions = np.stack([m.predict(x, verbose=0) for m in members]).astype("float64")
    assert (predictions[0] < 1e-15).mean() > 0.3  # the clip matters
    assert all(has_softmax_head(m) for m in members)
    stacker = fit_stacking(predictions, y, "classification", feature_kind="log_probabilities")
    model = stacked_model(members, stacker, (4,), "classification")
    reloaded = keras.models.load_model(export_model(model, workdir=tmp_path, name="c", version=1,
                                                    formats=("keras",)).files["keras"])
    assert np.max(np.abs(reloaded.predict(x, verbose=0) - stacker.predict(predictions))) < TOLERANCE


def test_log_probabilities_of_real_hypermodels_with_augmentation_and_mixed_precision(tmp_path):
    """Tuneboard's own members: CNNs taking raw uint8 images, with augmentation layers (which
    must stay off at serving time) and one under a bfloat16 policy (float32 head). Their
    log-probabilities, computed through the logits, reproduce the stacker's features."""
    from tests.unit.test_export_kinds import IMAGES, build

    members = [build("cnn", IMAGES, "image", flip=True, rotation=0.2, batch_norm=False, dropout=0.0),
               build("cnn", IMAGES, "image", policy="mixed_bfloat16", dropout=0.0)]
    assert all(has_softmax_head(m) for m in members)
    y = np.arange(len(IMAGES)) % 3
    predictions = np.stack([m.predict(IMAGES, verbose=0) for m in members]).astype("float64")
    stacker = fit_stacking(predictions, y, "classification", feature_kind="log_probabilities", folds=2)
    model = stacked_model(members, stacker, (8, 8, 1), "classification")
    reloaded = keras.models.load_model(export_model(model, workdir=tmp_path, name="r", version=1,
                                                    formats=("keras",)).files["keras"])
    assert reloaded.inputs[0].dtype == "uint8"
    assert np.max(np.abs(reloaded.predict(IMAGES, verbose=0) - stacker.predict(predictions))) < TOLERANCE


def test_a_stacked_regression_is_ridge_as_one_linear_dense(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 3)).astype("float32")
    y = x @ np.array([1.0, -2.0, 0.5]) + rng.normal(0, 0.1, 300)
    members = []
    for seed in (1, 2):
        keras.utils.set_random_seed(seed)
        inputs = keras.Input(shape=(3,))
        members.append(keras.Model(inputs, keras.layers.Dense(1, name="prediction")(
            keras.layers.Dense(8, activation="relu")(inputs)), name="reg"))
    predictions = np.stack([m.predict(x, verbose=0) for m in members]).astype("float64")
    stacker = fit_stacking(predictions, y, "regression")
    assert stacker.feature_kind == "values"
    model = stacked_model(members, stacker, (3,), "regression")
    reloaded = keras.models.load_model(export_model(model, workdir=tmp_path, name="g", version=1,
                                                    formats=("keras",)).files["keras"])
    assert np.max(np.abs(reloaded.predict(x, verbose=0) - stacker.predict(predictions))) < TOLERANCE


@pytest.mark.parametrize("kind", ["weighted", "stacked"])
def test_an_ensemble_is_quantized_like_a_single_model(digits_stack, kind, tmp_path):
    """Ensembles and stacked models are one Keras model with nested members: Keras int8 reaches the members'
    Dense layers, and the full-integer TFLite file (calibrated on member-training rows) holds no float op."""
    from workers.ensembles.keras_models import weighted_average_model
    from workers.export import quantization

    members, stackers, x_test, y_test, _ = digits_stack
    for i, member in enumerate(members):  # each test builds its own ensemble around the shared members
        member.name = f"mlp_{i}"
    model = (weighted_average_model(members, [0.5, 0.5], (64,)) if kind == "weighted"
             else stacked_model(members, stackers["probabilities"], (64,)))
    expected = model.predict(x_test, verbose=0)
    int8 = quantization.keras_quantized(model, "int8")
    assert any(getattr(layer, "kernel", None) is not None and layer.kernel.dtype == "int8"
               for layer in int8._flatten_layers(include_self=False, recursive=True)), "the members' Dense layers"
    int8.save(tmp_path / "int8.keras")
    reloaded = keras.saving.load_model(tmp_path / "int8.keras").predict(x_test, verbose=0)
    assert np.mean(reloaded.argmax(1) == y_test) >= np.mean(expected.argmax(1) == y_test) - 0.05
    flatbuffer = quantization.full_integer_tflite(model, x_test[:100], tmp_path)  # any rows calibrate a unit test
    assert quantization.float_tensors_in_ops(flatbuffer) == []
    outputs = quantization.TfliteRunner(flatbuffer)(x_test)
    assert np.mean(outputs.argmax(1) == y_test) >= np.mean(expected.argmax(1) == y_test) - 0.05
