"""Exports of the image, text and sequence models: every format takes the raw input the model
takes (uint8 pixels, UTF-8 strings, float sequences) and reproduces model.predict; a format
that cannot hold a model gets a reason instead of a broken file."""

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from experiments.tuning.hypermodel_catalog import BUILTIN
from workers import hypermodels
from workers.export.formats import describe_input, export_model
from workers.export.tflite import TFLITE_TEXT_REASON
from workers.hypermodels.base import DataInfo
from workers.tuners.hyperparameters import to_hyperparameters

RNG = np.random.default_rng(1)
IMAGES = RNG.integers(0, 256, size=(32, 8, 8, 1), dtype=np.uint8)
TEXTS = np.array(["good fine day", "bad sad night", "a great good film", "awful, poor: bad!"] * 4)
SEQUENCES = RNG.normal(size=(16, 10, 2)).astype("float32")


def build(name: str, x: np.ndarray, kind: str, policy: str = "float32", **values) -> keras.Model:
    hp = to_hyperparameters(BUILTIN[name].default_space)
    hp.values.update(values)
    for param in hp.space:  # parents first: a child made active by a chosen value gets its default
        if param.name not in hp.values and hp.is_active(param):
            hp.values[param.name] = param.default
    info = DataInfo.from_training_split(x, "classification", 3, kind=kind)
    keras.mixed_precision.set_global_policy(policy)
    try:
        return hypermodels.build(name, hp, info)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def serve(exported, tmp_path, batch) -> np.ndarray:
    """The SavedModel's serving_default signature, loaded from the zip as TF Serving would."""
    with zipfile.ZipFile(exported.files["savedmodel"]) as archive:
        archive.extractall(tmp_path / "unzipped")
    serving = tf.saved_model.load(str(tmp_path / "unzipped" / "m" / "1")).signatures["serving_default"]
    (output,) = serving(tf.constant(batch)).values()
    return output.numpy()


def tflite_predict(path, batch: np.ndarray) -> np.ndarray:
    interpreter = tf.lite.Interpreter(model_path=str(path))
    given, taken = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    if given["shape_signature"][0] == 1:  # one example per call
        interpreter.allocate_tensors()
        outputs = []
        for row in batch:
            interpreter.set_tensor(given["index"], row[None])
            interpreter.invoke()
            outputs.append(interpreter.get_tensor(taken["index"]))
        return np.concatenate(outputs)
    interpreter.resize_tensor_input(given["index"], list(batch.shape))
    interpreter.allocate_tensors()
    interpreter.set_tensor(given["index"], batch)
    interpreter.invoke()
    return interpreter.get_tensor(taken["index"])


@pytest.fixture(scope="module")
def augmented_cnn():
    # Augmentation on, batch norm and dropout off: any difference at serving time would be
    # the Random* layers running when they must not.
    return build("cnn", IMAGES, "image", flip=True, rotation=0.2, zoom=0.2, batch_norm=False, dropout=0.0)


def test_a_cnn_with_augmentation_serves_raw_uint8_images_without_augmenting_them(augmented_cnn, tmp_path):
    exported = export_model(augmented_cnn, workdir=tmp_path, name="m", version=1)
    expected = augmented_cnn.predict(IMAGES[:8], verbose=0)
    # Served under its position, not its Keras input's name ("images"): see experiments/serving/contract.py.
    assert exported.signature["serving"]["inputs"] == [{"name": "input_0", "shape": [None, 8, 8, 1], "dtype": "uint8"}]
    assert [spec["name"] for spec in exported.signature["serving"]["outputs"]] == ["output_0"]
    np.testing.assert_allclose(serve(exported, tmp_path, IMAGES[:8]), expected, atol=1e-6)
    assert set(exported.files) == {"keras", "savedmodel", "tflite", "tflite_int8"} and exported.unavailable == {}
    np.testing.assert_allclose(tflite_predict(exported.files["tflite"], IMAGES[:8]), expected, atol=1e-5)
    np.testing.assert_allclose(tflite_predict(exported.files["tflite_int8"], IMAGES[:8]), expected, atol=0.05)
    signatures = tf.lite.Interpreter(model_path=str(exported.files["tflite"])).get_signature_list()
    assert signatures == {"serving_default": {"inputs": ["input_0"], "outputs": ["output_0"]}}
    reloaded = keras.models.load_model(exported.files["keras"])
    np.testing.assert_allclose(reloaded.predict(IMAGES[:8], verbose=0), expected, atol=1e-6)
    assert exported.signature["input_description"]["savedmodel"].startswith("raw uint8 images of shape (8, 8, 1)")


def test_a_text_model_serves_raw_strings_and_says_why_there_is_no_tflite_file(tmp_path):
    model = build("text", TEXTS, "text", encoder="transformer", sequence_length=32, embedding_dim=16)
    exported = export_model(model, workdir=tmp_path, name="m", version=1)
    expected = model.predict(TEXTS[:6].astype(object), verbose=0)
    np.testing.assert_allclose(serve(exported, tmp_path, TEXTS[:6].tolist()), expected, atol=1e-6)
    assert set(exported.files) == {"keras", "savedmodel"}
    assert exported.unavailable == {"tflite": TFLITE_TEXT_REASON, "tflite_int8": TFLITE_TEXT_REASON}
    assert exported.signature["unavailable"] == exported.unavailable
    assert not list(tmp_path.glob("*.tflite"))
    reloaded = keras.models.load_model(exported.files["keras"])  # built-in layers only: no custom objects
    np.testing.assert_allclose(reloaded.predict(TEXTS[:6].astype(object), verbose=0), expected, atol=1e-6)
    assert exported.signature["input_description"] == {"keras": "raw UTF-8 strings, one text per example",
                                                       "savedmodel": "raw UTF-8 strings, one text per example"}


def test_an_lstm_model_gets_tflite_files_that_take_one_example_per_call(tmp_path):
    model = build("sequence", SEQUENCES, "sequence", layer_type="lstm", num_layers=2)
    exported = export_model(model, workdir=tmp_path, name="m", version=1)
    expected = model.predict(SEQUENCES[:4], verbose=0)
    np.testing.assert_allclose(serve(exported, tmp_path, SEQUENCES[:4]), expected, atol=1e-6)
    np.testing.assert_allclose(tflite_predict(exported.files["tflite"], SEQUENCES[:4]), expected, atol=1e-5)
    np.testing.assert_allclose(tflite_predict(exported.files["tflite_int8"], SEQUENCES[:4]), expected, atol=0.05)
    assert exported.signature["input_description"]["tflite"] == (
        "float32 sequences of shape (10, 2) (time steps, features) (one example per call: batch size 1)")
    assert "batch size 1" not in exported.signature["input_description"]["savedmodel"]


def test_a_mixed_bfloat16_model_exports_and_reloads_under_the_default_policy(tmp_path):
    model = build("cnn", IMAGES, "image", policy="mixed_bfloat16", batch_norm=True)
    assert model.get_layer("conv_0").compute_dtype == "bfloat16"
    model.fit(IMAGES, np.arange(32) % 3, epochs=1, batch_size=16, verbose=0)
    expected = model.predict(IMAGES[:8], verbose=0)
    exported = export_model(model, workdir=tmp_path, name="m", version=1)
    assert keras.mixed_precision.global_policy().name == "float32"
    np.testing.assert_allclose(serve(exported, tmp_path, IMAGES[:8]), expected, atol=1e-6)
    reloaded = keras.models.load_model(exported.files["keras"])
    np.testing.assert_allclose(reloaded.predict(IMAGES[:8], verbose=0), expected, atol=1e-6)
    # TFLite has no bfloat16 kernels: its files compute in float32 with the same weights.
    np.testing.assert_allclose(tflite_predict(exported.files["tflite"], IMAGES[:8]), expected, atol=0.02)


def test_describe_input_says_what_one_example_looks_like():
    images = keras.Input((28, 28, 3), dtype="uint8")
    assert describe_input(keras.Model(images, images)) == (
        "raw uint8 images of shape (28, 28, 3) (height, width, channels), values 0-255")
    features = keras.Input((5,))
    assert describe_input(keras.Model(features, features)) == "float32 feature vectors of length 5"
    sequences = keras.Input((10, 2))
    assert describe_input(keras.Model(sequences, sequences)) == (
        "float32 sequences of shape (10, 2) (time steps, features)")


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX not installed")
def test_a_jax_worker_that_can_import_tensorflow_leaves_savedmodel_and_tflite_to_a_conversion(tmp_path):
    """make run's JAX worker shares a virtualenv with TensorFlow; TFLite cannot convert what a JAX model
    exports, so the TensorFlow formats wait for the cpu queue's conversion job, as on a fleet without it."""
    script = (
        "import keras, numpy as np, sys\n"
        "from workers.export.formats import export_model\n"
        "model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])\n"
        "out = export_model(model, workdir=sys.argv[1], name='m', version=1)\n"
        "print(keras.backend.backend(), sorted(out.files), sorted(out.pending))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KERAS_BACKEND": "jax"}, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[-2] == "jax ['keras'] ['savedmodel', 'tflite', 'tflite_int8']"
