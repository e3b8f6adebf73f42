"""Serving formats of a trained Keras model: `.keras`, a SavedModel zipped in TF Serving's
`<name>/<version>/` layout, and TFLite (float32, and dynamic-range int8). Knows nothing of
the ORM: a model and a folder in, files and the model's signature out."""

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

FORMATS = ("keras", "savedmodel", "tflite", "tflite_int8")


@dataclass
class Exported:
    files: dict[str, Path]  # format -> file
    signature: dict


def _tensor_spec(tensor) -> dict:
    name = getattr(tensor, "name", "") or ""
    return {"name": name.split(":")[0], "shape": [None if d is None else int(d) for d in tensor.shape],
            "dtype": str(getattr(tensor.dtype, "name", tensor.dtype))}


def _serving_signature(saved_model_dir: Path) -> dict:
    serving = tf.saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    _, inputs = serving.structured_input_signature
    return {
        "name": "serving_default",
        "inputs": [_tensor_spec(spec) | {"name": key} for key, spec in sorted(inputs.items())],
        "outputs": [_tensor_spec(spec) | {"name": key} for key, spec in sorted(serving.structured_outputs.items())],
    }


def _zip_tree(root: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            archive.write(path, path.relative_to(root))
    return target


def _tflite(saved_model_dir: Path, target: Path, *, quantise: bool) -> Path:
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir))
    if quantise:
        # Dynamic-range quantisation: int8 weights, float activations; no calibration data needed.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    target.write_bytes(converter.convert())
    return target


def export_model(model, *, workdir: Path, name: str, version: int) -> Exported:
    workdir = Path(workdir)
    stem = f"{name}-v{version}"
    keras_path = workdir / f"{stem}.keras"
    model.save(keras_path)
    serving_root = workdir / "serving"
    saved_model_dir = serving_root / name / str(version)
    model.export(str(saved_model_dir), format="tf_saved_model", verbose=False)
    files = {
        "keras": keras_path,
        "savedmodel": _zip_tree(serving_root, workdir / f"{stem}-savedmodel.zip"),
        "tflite": _tflite(saved_model_dir, workdir / f"{stem}.tflite", quantise=False),
        "tflite_int8": _tflite(saved_model_dir, workdir / f"{stem}-int8.tflite", quantise=True),
    }
    signature = {
        "keras": {"inputs": [_tensor_spec(t) for t in model.inputs],
                  "outputs": [_tensor_spec(t) for t in model.outputs]},
        "serving": _serving_signature(saved_model_dir),
    }
    shutil.rmtree(serving_root, ignore_errors=True)
    return Exported(files=files, signature=signature)
