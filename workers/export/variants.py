"""One quantized variant made from a float model and measured beside it the same way: its file, the
metrics both reach on the test split (from their outputs, so a TFLite file and a Keras model are scored
alike), their sizes and their CPU latency per row at batch 1 and 64."""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.errors import TuneboardError
from experiments.presentation.prediction_csv import class_probabilities
from workers.export import quantization
from workers.export.formats import export_model, exports_tensorflow_formats
from workers.export.saved_model import export_saved_model
from workers.export.tflite import _convert, _takes_strings

LATENCY_BATCHES = (1, 64)
# Probabilities are clipped before the log: a quantized softmax can give an exact 0.
LOG_EPSILON = 1e-7


class VariantUnavailable(TuneboardError):
    """The model cannot have this variant; the message says why and what to ask for instead."""


@dataclass
class Side:
    """One of the two models measured: a file and a callable giving outputs for a batch of rows."""

    path: Path
    predict: object
    runtime: str
    keras_model: object = None  # a Keras side's model (what a SavedModel is exported from)


def prediction_metrics(outputs: np.ndarray, y: np.ndarray, *, task: str, n_classes: int) -> dict:
    """Accuracy and log loss (classification) or mean squared and absolute error (regression)."""
    if task == "classification":
        probabilities = class_probabilities(np.asarray(outputs, dtype=np.float64), n_classes)
        labels = np.asarray(y).reshape(-1).astype(int)
        chosen = np.clip(probabilities[np.arange(len(labels)), labels], LOG_EPSILON, 1.0)
        return {"accuracy": float(np.mean(probabilities.argmax(axis=1) == labels)),
                "log_loss": float(-np.mean(np.log(chosen)))}
    errors = np.asarray(outputs, dtype=np.float64).reshape(len(y), -1) - np.asarray(y, np.float64).reshape(len(y), -1)
    return {"mse": float(np.mean(errors ** 2)), "mae": float(np.mean(np.abs(errors)))}


def _keras_side(model, path: Path) -> Side:
    model.save(path)
    return Side(path, model.predict_on_batch, "Keras", keras_model=model)


def _tflite_side(flatbuffer: bytes, path: Path) -> Side:
    path.write_bytes(flatbuffer)
    runner = quantization.TfliteRunner(flatbuffer)
    return Side(path, runner, runner.name)


def _float_tflite(model, workdir: Path) -> tuple[bytes, Path]:
    """The float TFLite file and the SavedModel it came from, with a static batch of one where TFLite needs it
    (as workers/export/tflite.py makes them)."""
    saved = export_saved_model(model, workdir / "float-saved")
    try:
        return _convert(saved, quantise=False), saved
    except Exception:  # recurrent layers convert only with a static batch
        saved = export_saved_model(model, workdir / "float-saved-one", batch_size=1)
        return _convert(saved, quantise=False), saved


def make_pair(model, method: str, x_train: np.ndarray, workdir: Path, *, stem: str = "model",
              seed: int = 0) -> tuple[Side, Side]:
    """(float, variant) for one method of experiments.models.ModelVariant.Method, the variant's file named
    `stem`-<variant>; raises with the reason when the model cannot have it."""
    if method.startswith("keras_"):
        mode = method.removeprefix("keras_")
        return (_keras_side(model, workdir / "float.keras"),
                _keras_side(quantization.keras_quantized(model, mode), workdir / f"{stem}-{mode}.keras"))
    if _takes_strings(model):
        raise VariantUnavailable("TFLite cannot hold this model's text preprocessing (TextVectorization's string "
                                 "ops); ask for the Keras int8 variant instead.")
    flatbuffer, saved = _float_tflite(model, workdir)
    base = _tflite_side(flatbuffer, workdir / "float.tflite")
    if method == "tflite_dynamic":
        return base, _tflite_side(_convert(saved, quantise=True), workdir / f"{stem}-dynamic-int8.tflite")
    if reason := quantization.full_integer_unavailable(model):
        raise VariantUnavailable(reason)
    made = quantization.full_integer_tflite(model, x_train, workdir, integer_io=method == "tflite_int8_io",
                                            per_tensor=method == "tflite_int8_tensor", seed=seed)
    return base, _tflite_side(made, workdir / f"{stem}-{method.removeprefix('tflite_').replace('_', '-')}.tflite")


def _finite(metrics: dict) -> dict:
    """NaN or infinite figures (a variant whose outputs overflowed) as None: JSON in PostgreSQL has neither."""
    return {name: value if np.isfinite(value) else None for name, value in metrics.items()}


def measure(side: Side, x_test: np.ndarray, y_test: np.ndarray, *, task: str, n_classes: int) -> dict:
    outputs = np.concatenate([np.asarray(side.predict(x_test[start:start + 64]))
                              for start in range(0, len(x_test), 64)])
    return {"metrics": _finite(prediction_metrics(outputs, y_test, task=task, n_classes=n_classes)),
            "size_bytes": side.path.stat().st_size,
            **{f"latency_ms_batch{batch}": quantization.latency_ms_per_row(side.predict, x_test, batch=batch)
               for batch in LATENCY_BATCHES}}


def saved_model_zip(side: Side, workdir: Path, *, name: str, version: int) -> Path | None:
    """A Keras variant's SavedModel zip, laid out as its model's own (`name`/`version`/), for TF Serving; None for a
    TFLite variant or on a JAX worker (its SavedModel would be jax2tf's, not what conversions make)."""
    if side.keras_model is None or not exports_tensorflow_formats():
        return None
    folder = workdir / "variant-savedmodel"
    folder.mkdir()
    return export_model(side.keras_model, workdir=folder, name=name, version=version, formats=["savedmodel"]).files[
        "savedmodel"]
