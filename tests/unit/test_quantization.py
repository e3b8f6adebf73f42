"""Quantized variants of a real trained model (workers/export/quantization.py): the full-integer TFLite file
holds only integer tensors in its ops, is calibrated on training rows only, and the runtime reproduces the
figures it was measured with; Keras's int8 model reloads from its .keras file with the same predictions."""

import keras
import numpy as np
import pytest
from sklearn.datasets import load_digits

from workers.export import quantization

X, Y = load_digits(return_X_y=True)
X = (X / 16).astype("float32")
TRAIN, TEST = slice(0, 1200), slice(1400, None)


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((64,))
    outputs = keras.layers.Dense(10, activation="softmax")(keras.layers.Dense(32, activation="relu")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(X[TRAIN], Y[TRAIN], epochs=8, batch_size=64, verbose=0)
    return model


def _accuracy(probabilities) -> float:
    return float(np.mean(np.argmax(probabilities, axis=1) == Y[TEST]))


def test_calibration_rows_come_from_the_training_split_only():
    rows = quantization.calibration_rows(X[TRAIN], count=50, seed=3)
    train = {row.tobytes() for row in X[TRAIN]}
    held_out = {row.tobytes() for row in X[1200:]} - train  # digits repeats a few images across splits
    assert len(rows) == 50 and all(row.tobytes() in train for row in rows)
    assert not any(row.tobytes() in held_out for row in rows)
    assert np.array_equal(rows, quantization.calibration_rows(X[TRAIN], count=50, seed=3)), "one seed, one draw"


def _scales_per_tensor(flatbuffer: bytes) -> set[int]:
    runtime, _ = quantization.interpreter(flatbuffer)
    return {len(t["quantization_parameters"]["scales"]) for t in runtime.get_tensor_details()}


@pytest.mark.parametrize(("integer_io", "per_tensor"), [(False, False), (True, False), (False, True)])
def test_full_integer_tflite_has_only_integer_ops_and_keeps_the_accuracy(model, tmp_path, integer_io, per_tensor):
    flatbuffer = quantization.full_integer_tflite(model, X[TRAIN], tmp_path, integer_io=integer_io,
                                                  per_tensor=per_tensor)
    assert quantization.float_tensors_in_ops(flatbuffer) == []
    runner = quantization.TfliteRunner(flatbuffer)
    if integer_io:
        assert runner.source["dtype"] == np.int8 and runner.target["dtype"] == np.int8
    # Per channel, the 32-unit layer's weights carry 32 scales; per tensor, no tensor has more than one.
    assert max(_scales_per_tensor(flatbuffer)) == (1 if per_tensor else 32)
    measured = _accuracy(runner(X[TEST]))
    assert measured >= _accuracy(model.predict(X[TEST], verbose=0)) - 0.03
    (tmp_path / "m.tflite").write_bytes(flatbuffer)
    reloaded = quantization.TfliteRunner((tmp_path / "m.tflite").read_bytes())
    assert _accuracy(reloaded(X[TEST], batch_size=7)) == measured, "another batch size, the same figure"


def test_a_dynamic_range_file_is_not_full_integer(model, tmp_path):
    from workers.export.saved_model import export_saved_model, tensorflow

    tf = tensorflow()
    converter = tf.lite.TFLiteConverter.from_saved_model(str(export_saved_model(model, tmp_path / "saved")))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    assert quantization.float_tensors_in_ops(converter.convert()), "the check must see float activations"


def test_keras_int8_reloads_from_its_file_with_the_same_predictions(model, tmp_path):
    quantized = quantization.keras_quantized(model, "int8")
    assert model.layers[1].kernel.dtype == "float32", "the float model is left as it was"
    quantized.save(tmp_path / "int8.keras")
    reloaded = keras.saving.load_model(tmp_path / "int8.keras")
    expected = quantized.predict(X[TEST], verbose=0)
    np.testing.assert_allclose(reloaded.predict(X[TEST], verbose=0), expected, atol=1e-6)
    assert _accuracy(expected) >= _accuracy(model.predict(X[TEST], verbose=0)) - 0.03


def test_keras_int8_of_a_text_model_leaves_its_lookup_layers_and_quantizes_the_rest(tmp_path):
    texts = np.array(["good film", "bad film", "good plot", "bad acting"] * 4)
    vectorize = keras.layers.TextVectorization(vocabulary=["good", "bad", "film", "plot", "acting"],
                                               output_sequence_length=3)
    inputs = keras.Input((1,), dtype="string")
    tokens = keras.layers.Embedding(8, 4)(vectorize(keras.ops.squeeze(inputs, -1)))
    model = keras.Model(inputs, keras.layers.Dense(2, activation="softmax")(keras.layers.Flatten()(tokens)))
    quantized = quantization.keras_quantized(model, "int8")
    assert quantized.layers[-1].kernel.dtype == "int8", "the Dense layer is quantized"
    quantized.save(tmp_path / "text-int8.keras")
    # predict_on_batch, as the variant job scores it: Keras's predict refuses NumPy strings.
    outputs = keras.saving.load_model(tmp_path / "text-int8.keras").predict_on_batch(texts[:, None])
    np.testing.assert_allclose(outputs, model.predict_on_batch(texts[:, None]), atol=0.05)


def test_a_recurrent_model_is_refused_full_integer_with_a_reason_before_any_conversion(tmp_path):
    inputs = keras.Input((5, 2))
    model = keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(keras.layers.LSTM(4)(inputs)))
    assert quantization.full_integer_unavailable(model) == quantization.RECURRENT_REASON
    with pytest.raises(ValueError, match="recurrent layers"):
        quantization.full_integer_tflite(model, np.zeros((10, 5, 2), "float32"), tmp_path)
    assert not any(tmp_path.iterdir()), "nothing was exported or converted"


def test_a_model_of_raw_uint8_images_is_full_integer_past_its_input_cast(tmp_path):
    """The cnn hypermodels take raw pixels: the one float op left is the CAST of the uint8 input."""
    inputs = keras.Input((8, 8, 1), dtype="uint8")
    x = keras.layers.Rescaling(1 / 16)(keras.ops.cast(inputs, "float32"))
    x = keras.layers.Conv2D(4, 3, activation="relu")(x)
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(keras.layers.Flatten()(x)))
    images = (X[TRAIN] * 16).reshape(-1, 8, 8, 1).astype("uint8")
    flatbuffer = quantization.full_integer_tflite(model, images, tmp_path)
    assert quantization.float_tensors_in_ops(flatbuffer) == []
    np.testing.assert_allclose(quantization.TfliteRunner(flatbuffer)(images[:20]),
                               model.predict(images[:20], verbose=0), atol=0.05)
