"""Quantized variants of a trained model and what each costs: Keras's own int8 (weights, as `.keras`), a
full-integer TFLite file (int8 weights and activations) calibrated on rows of the training split only, and
the figures that decide whether a variant is worth offering (metric on the test split, size, latency)."""

import time
import warnings
from pathlib import Path

import keras
import numpy as np

from workers.export.saved_model import export_saved_model, tensorflow

CALIBRATION_ROWS = 200  # the converter's guide suggests ~100-500 samples: ranges settle well before that
INTEGER_TYPES = {np.int8, np.uint8, np.int16, np.int32, np.int64}
# At the edges of a model that takes and gives float: these two ops convert, and only they may touch float
# (and a CAST of an integer model input, e.g. raw uint8 pixels, to the float the QUANTIZE after it takes).
BOUNDARY_OPS = {"QUANTIZE", "DEQUANTIZE"}


def keras_quantized(model, mode: str = "int8"):
    """A copy of the model with Keras's post-training quantization applied (the float model is untouched)."""
    copy = keras.models.clone_model(model)
    copy.set_weights(model.get_weights())
    with warnings.catch_warnings():  # Keras names every layer it leaves in float (inputs, normalization)
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method", category=UserWarning)
        # Only built layers: a text model's lookup layers are never built, and Keras refuses to walk past them.
        copy.quantize(mode, filters=lambda layer: layer.built)
    return copy


def calibration_rows(x_train: np.ndarray, *, count: int = CALIBRATION_ROWS, seed: int = 0) -> np.ndarray:
    """The rows the converter measures activation ranges on: drawn from the training split and nothing else,
    so the validation and test figures stay unseen by every step that made the model."""
    rng = np.random.default_rng(seed)
    take = min(count, len(x_train))
    return np.asarray(x_train)[np.sort(rng.choice(len(x_train), size=take, replace=False))]


RECURRENT_REASON = ("No full-integer TFLite file for a model with recurrent layers (LSTM, GRU): TensorFlow's "
                    "calibration crashes its process on them (TF 2.21); the dynamic-range TFLite file and "
                    "Keras int8 are offered instead.")


def full_integer_unavailable(model) -> str | None:
    """Why this model gets no full-integer file, or None. Checked before converting: the converter's failure
    here is a segmentation fault, which would take the worker child with it."""
    layers = model._flatten_layers(include_self=False, recursive=True)  # Keras's walk into nested models
    return RECURRENT_REASON if any(isinstance(layer, keras.layers.RNN) for layer in layers) else None


def full_integer_tflite(model, x_train: np.ndarray, workdir: Path, *, integer_io: bool = False,
                        per_tensor: bool = False, seed: int = 0) -> bytes:
    """int8 weights and activations (TFLITE_BUILTINS_INT8 only: the conversion fails rather than leave a float
    op behind); with `integer_io` the inputs and outputs are int8 too, for integer-only accelerators (a model of
    raw uint8 pixels keeps the CAST of its input). With `per_tensor` each weight tensor gets one scale instead
    of one per output channel: a smaller file (a small model's per-channel scales and int64 zero points are a
    tenth of it) and what some older integer accelerators require, at some risk to accuracy. A model that
    converts only with a static batch gets a file that takes one example per call, as the float TFLite files do
    (workers/export/tflite.py); recurrent models, the known such case, are refused first."""
    reason = full_integer_unavailable(model)
    if reason is not None:
        raise ValueError(reason)
    rows = calibration_rows(x_train, seed=seed).astype(model.inputs[0].dtype)
    try:
        return _full_integer(export_saved_model(model, Path(workdir) / "quantization-source"), rows, integer_io,
                             per_tensor)
    except Exception:  # the converter raises many types; a static batch is the one known way out
        single = export_saved_model(model, Path(workdir) / "quantization-one-example", batch_size=1)
        return _full_integer(single, rows, integer_io, per_tensor)


def _full_integer(saved: Path, rows: np.ndarray, integer_io: bool, per_tensor: bool) -> bytes:
    tf = tensorflow()
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved))
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([row[None]] for row in rows)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if integer_io:
        converter.inference_input_type = converter.inference_output_type = tf.int8
    # The converter's only switch for per-tensor weight scales (TF 2.21 names it experimental, not public API).
    converter._experimental_disable_per_channel = per_tensor
    return converter.convert()


def interpreter(flatbuffer: bytes):
    """LiteRT's interpreter where ai-edge-litert is installed, else TensorFlow's (deprecated in its favour);
    the second value names which, for the page."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter(model_content=flatbuffer), "LiteRT"
    except ImportError:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated", category=UserWarning)
            return tensorflow().lite.Interpreter(model_content=flatbuffer), "TensorFlow Lite"


def float_tensors_in_ops(flatbuffer: bytes) -> list[str]:
    """The ops (by name) that read or write a non-integer tensor, boundary conversions aside: empty for a
    full-integer model. Read before the tensors are allocated, when the CPU delegate has not yet folded
    the ops into one."""
    runtime, _ = interpreter(flatbuffer)
    dtypes = {t["index"]: t["dtype"] for t in runtime.get_tensor_details()}
    model_inputs = {detail["index"] for detail in runtime.get_input_details()}
    found = []
    for op in runtime._get_ops_details():  # the runtime's only listing of ops and their tensors
        tensors = [i for i in (*op["inputs"], *op["outputs"]) if i >= 0]
        boundary = op["op_name"] in BOUNDARY_OPS or (op["op_name"] == "CAST" and set(op["inputs"]) <= model_inputs
                                                     and all(dtypes[i] in INTEGER_TYPES for i in op["inputs"]))
        if not boundary and any(dtypes[i] not in INTEGER_TYPES for i in tensors):
            found.append(op["op_name"])
    return found


class TfliteRunner:
    """A TFLite model in the runtime, called like a Keras model's predict: (de)quantizes at int8 edges with
    the file's own scale and zero point."""

    def __init__(self, flatbuffer: bytes):
        self.runtime, self.name = interpreter(flatbuffer)
        (self.source,), (self.target,) = self.runtime.get_input_details(), self.runtime.get_output_details()
        self.rows = None
        self.one_example = int(self.source["shape_signature"][0]) == 1  # a static batch of one

    def __call__(self, x: np.ndarray, *, batch_size: int = 64) -> np.ndarray:
        batch_size = 1 if self.one_example else batch_size
        outputs = []
        for start in range(0, len(x), batch_size):
            batch = np.asarray(x[start:start + batch_size])
            if batch.shape != self.rows:  # resizing reallocates: only when the shape changes
                self.runtime.resize_tensor_input(self.source["index"], list(batch.shape))
                self.runtime.allocate_tensors()
                self.rows = batch.shape
            self.runtime.set_tensor(self.source["index"], _to_input(batch, self.source))
            self.runtime.invoke()
            outputs.append(_from_output(self.runtime.get_tensor(self.target["index"]), self.target))
        return np.concatenate(outputs)


def _to_input(batch: np.ndarray, detail: dict) -> np.ndarray:
    scale, zero = detail["quantization"]
    if np.issubdtype(detail["dtype"], np.integer) and scale:
        info = np.iinfo(detail["dtype"])
        return np.clip(np.round(batch / scale + zero), info.min, info.max).astype(detail["dtype"])
    return batch.astype(detail["dtype"])


def _from_output(values: np.ndarray, detail: dict) -> np.ndarray:
    scale, zero = detail["quantization"]
    if np.issubdtype(values.dtype, np.integer) and scale:
        return (values.astype(np.float32) - zero) * scale
    return values


def latency_ms_per_row(predict, x: np.ndarray, *, batch: int, repeats: int = 20) -> float:
    """Median milliseconds per row of `predict` on `batch` rows, after two calls that warm it up."""
    rows = np.resize(np.asarray(x), (batch, *np.asarray(x).shape[1:])).astype(np.asarray(x).dtype)
    for _ in range(2):
        predict(rows)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        predict(rows)
        times.append((time.perf_counter() - started) * 1000 / batch)
    return float(np.median(times))
