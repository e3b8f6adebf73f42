"""Serving formats of a trained Keras model (.keras, SavedModel, TFLite), with TensorFlow imported only for the
formats that need it (docs/design/datasets-and-models.md)."""

import importlib.util
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from workers.export.saved_model import export_saved_model, serving_signature, tensor_spec, zip_tree
from workers.export.tflite import tflite_files

FORMATS = ("keras", "savedmodel", "tflite", "tflite_int8")
TENSORFLOW_FORMATS = FORMATS[1:]


@dataclass
class Exported:
    files: dict[str, Path]  # format -> file
    signature: dict
    unavailable: dict[str, str] = field(default_factory=dict)  # format -> why it has no file, for a person
    pending: list[str] = field(default_factory=list)  # formats left to a TensorFlow worker (no TensorFlow here)


def has_tensorflow() -> bool:
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except ImportError:  # an import hook that keeps it out says so by raising
        return False


def exports_tensorflow_formats() -> bool:
    """Whether this worker makes SavedModel and TFLite itself: only under Keras's TensorFlow backend. A JAX
    worker that can import TensorFlow (make run's shared virtualenv) still leaves them to a conversion job:
    TFLite cannot convert the jax2tf graph a JAX model exports ('tfl.assign_variable' errors)."""
    import keras

    return has_tensorflow() and keras.backend.backend() == "tensorflow"


def _describe_one(shape: tuple, dtype: str) -> str:
    dims = tuple(None if d is None else int(d) for d in shape)
    if dtype == "string":
        return "raw UTF-8 strings, one text per example"
    if dtype == "uint8" and len(dims) in (2, 3):
        return f"raw uint8 images of shape {dims} (height, width{', channels' if len(dims) == 3 else ''}), values 0-255"
    if len(dims) == 1:
        return f"{dtype} feature vectors of length {dims[0]}"
    if len(dims) == 2 and dtype.startswith("float"):
        return f"{dtype} sequences of shape {dims} (time steps, features)"
    return f"{dtype} arrays of shape {dims}"


def describe_input(model) -> str:
    """What one example fed to the model (and to every exported format) looks like, for a
    person: "raw uint8 images of shape (8, 8, 1) ...", "raw UTF-8 strings ...", ..."""
    parts = []
    for tensor in model.inputs:
        dtype = str(getattr(tensor.dtype, "name", tensor.dtype))
        parts.append(_describe_one(tuple(tensor.shape[1:]), dtype))
    return "; ".join(parts)


def export_model(model, *, workdir: Path, name: str, version: int, formats=FORMATS) -> Exported:
    """The model in `formats` (all by default). Without TensorFlow's backend here, the formats that need
    it are left `pending` for a conversion job; a conversion asks only for those."""
    workdir = Path(workdir)
    stem = f"{name}-v{version}"
    files: dict[str, Path] = {}
    if "keras" in formats:
        files["keras"] = workdir / f"{stem}.keras"
        model.save(files["keras"])
    wanted = [fmt for fmt in TENSORFLOW_FORMATS if fmt in formats]
    pending = wanted if wanted and not exports_tensorflow_formats() else []
    signature = {"keras": {"inputs": [tensor_spec(t) for t in model.inputs],
                           "outputs": [tensor_spec(t) for t in model.outputs]}}
    unavailable: dict[str, str] = {}
    one_example: set[str] = set()
    if wanted and not pending:
        serving_root = workdir / "serving"
        saved_model_dir = serving_root / name / str(version)
        export_saved_model(model, saved_model_dir)
        if "savedmodel" in wanted:
            files["savedmodel"] = zip_tree(serving_root, workdir / f"{stem}-savedmodel.zip")
        made, unavailable, one_example = tflite_files(model, saved_model_dir, workdir, stem, wanted)
        files.update(made)
        signature["serving"] = serving_signature(saved_model_dir)
        shutil.rmtree(serving_root, ignore_errors=True)
    described = describe_input(model)
    # Per format: what one call takes, for the download page.
    signature["input_description"] = {
        fmt: described + (" (one example per call: batch size 1)" if fmt in one_example else "") for fmt in files}
    # A copy of Exported.unavailable, so it is stored wherever the signature is.
    signature["unavailable"] = unavailable
    return Exported(files=files, signature=signature, unavailable=unavailable, pending=pending)
