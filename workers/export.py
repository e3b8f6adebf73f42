"""Serving formats of a trained Keras model: `.keras`, a SavedModel zipped in TF Serving's
`<name>/<version>/` layout, and TFLite (float32, and dynamic-range int8). Knows nothing of
the ORM: a model and a folder in, files and the model's signature out.

Models take raw input (uint8 pixels, UTF-8 strings, float features): preprocessing is part
of them. The SavedModel (and the TFLite files made from it) serve their inputs as `input_0`, ...
and their outputs as `output_0`, ..., whatever the model's layers are called. A format that
cannot hold a model gets no file, only a reason in `Exported.unavailable`; TFLite, for one, has
no kernels for TextVectorization's string ops.

Only `.keras` is written without TensorFlow: on a worker that lacks it (a JAX worker), the other
formats are `Exported.pending`, made later from the `.keras` file by a conversion job on a
TensorFlow worker (workers/conversions.py). TensorFlow is imported only when a format needs it."""

import importlib.util
import shutil
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import keras
import numpy as np

from experiments.serving.contract import input_key, output_key

FORMATS = ("keras", "savedmodel", "tflite", "tflite_int8")
TENSORFLOW_FORMATS = FORMATS[1:]
TFLITE_TEXT_REASON = (
    "TFLite cannot hold this model's text preprocessing (TextVectorization uses string ops the TFLite "
    "runtime lacks); use the SavedModel or .keras file."
)


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


def _tf():
    import tensorflow as tf  # only the formats that need it load it (a JAX worker has none)

    return tf


def _tensor_spec(tensor) -> dict:
    name = getattr(tensor, "name", "") or ""
    return {"name": name.split(":")[0], "shape": [None if d is None else int(d) for d in tensor.shape],
            "dtype": str(getattr(tensor.dtype, "name", tensor.dtype))}


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


def _by_position(items) -> list:
    # input_2 before input_10: the keys are `<kind>_<position>`, so shorter is earlier.
    return sorted(items, key=lambda item: (len(item[0]), item[0]))


def _serving_signature(saved_model_dir: Path) -> dict:
    serving = _tf().saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    _, inputs = serving.structured_input_signature
    return {
        "name": "serving_default",
        "inputs": [_tensor_spec(spec) | {"name": key} for key, spec in _by_position(inputs.items())],
        "outputs": [_tensor_spec(spec) | {"name": key}
                    for key, spec in _by_position(serving.structured_outputs.items())],
    }


def _zip_tree(root: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            archive.write(path, path.relative_to(root))
    return target


def _takes_strings(model) -> bool:
    return any(str(getattr(t.dtype, "name", t.dtype)) == "string" for t in model.inputs)


def _runs(flatbuffer: bytes) -> None:
    """Raises unless the TFLite runtime can load the model and run it once on zeros: a
    converted file that cannot run in the runtime is not worth offering."""
    with warnings.catch_warnings():
        # Its successor (ai_edge_litert) is not a dependency; TF 2.21 still ships this one.
        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated", category=UserWarning)
        interpreter = _tf().lite.Interpreter(model_content=flatbuffer)
    for detail in interpreter.get_input_details():
        shape = [1 if d < 0 else int(d) for d in detail["shape_signature"]]
        interpreter.resize_tensor_input(detail["index"], shape)
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        interpreter.set_tensor(detail["index"], np.zeros(detail["shape"], dtype=detail["dtype"]))
    interpreter.invoke()


def _reason(exc: Exception) -> str:
    """The converter's message without its MLIR location prefixes ("loc(callsite(fused[...")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line.rsplit("error: ", 1)[1] for line in lines if "error: " in line]
    detail = (errors or lines or [""])[0]
    if detail.startswith("loc("):
        detail = detail.rsplit("): ", 1)[-1]
    return f"{type(exc).__name__}: {detail}"[:300]


def _convert(saved_model_dir: Path, *, quantise: bool) -> bytes:
    tf = _tf()
    converter = tf.lite.TFLiteConverter.from_saved_model(str(saved_model_dir))
    if quantise:
        # Dynamic-range quantisation: int8 weights, float activations; no calibration data needed.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    flatbuffer = converter.convert()
    _runs(flatbuffer)
    return flatbuffer


def _float32_config(config):
    """The model's config with mixed-precision policies made float32, and whether any was."""
    if isinstance(config, list):
        pairs = [_float32_config(item) for item in config]
        return [item for item, _ in pairs], any(changed for _, changed in pairs)
    if not isinstance(config, dict):
        return config, False
    if config.get("class_name") == "DTypePolicy" and config.get("config", {}).get("name", "").startswith("mixed_"):
        return {**config, "config": {**config["config"], "name": "float32"}}, True
    pairs = {key: _float32_config(value) for key, value in config.items()}
    return {key: item for key, (item, _) in pairs.items()}, any(changed for _, changed in pairs.values())


def _float32_twin(model):
    """The same model computing in float32, or None when it already does. Mixed precision
    keeps the weights in float32 and computes in bfloat16/float16, for which TFLite has no
    kernels ("'tf.Sub' op is neither a custom op nor a flex op" on bfloat16 tensors), so the
    TFLite files are converted from this twin with the very same weights."""
    config, changed = _float32_config(keras.saving.serialize_keras_object(model))
    if not changed:
        return None
    # safe_mode=False lets ResNeXt's Lambda layers through: the config comes from the model
    # in memory, not from a file someone sent.
    twin = keras.saving.deserialize_keras_object(config, safe_mode=False)
    twin.set_weights(model.get_weights())
    return twin


def _export_saved_model(model, target: Path, *, batch_size: int | None = None) -> Path:
    """The model's inference pass as a SavedModel ("serving_default"). Not model.export():
    Keras 3.15 exports `model.__call__` without training=False, and the Random* augmentation
    layers, whose call defaults to training=True, then flip and rotate every served image.

    Inputs are named by position (`input_0`, ...) and outputs too (`output_0`, ...), not after
    the Keras layers (`images`, `features`, ...): every model taking the same input then serves
    under one signature, so the versions of a registered model are interchangeable for a client
    that names its inputs (experiments/serving/contract.py)."""
    specs = [_tf().TensorSpec((batch_size, *t.shape[1:]), t.dtype, name=input_key(position))
             for position, t in enumerate(model.inputs)]

    def serve(inputs):
        outputs = keras.tree.flatten(model(inputs, training=False))
        return {output_key(position): tensor for position, tensor in enumerate(outputs)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", serve, input_signature=[specs[0] if len(specs) == 1 else specs])
    archive.write_out(str(target), verbose=False)
    return target


def _one_example_saved_model(model, workdir: Path) -> Path:
    """The model exported for batches of exactly one. LSTM and GRU layers only convert with a
    static batch size: with a free one the converter stops at TensorListReserve ("requires
    element_shape to be static"), and converting the Keras function directly gives a file
    whose while loop cannot read its weights at run time."""
    return _export_saved_model(model, workdir / "serving-one-example", batch_size=1)


def _unavailable(exc: Exception) -> str:
    return f"TFLite cannot hold this model ({_reason(exc)}); use the SavedModel or .keras file."


def _tflite_files(model, saved_model_dir: Path, workdir: Path, stem: str,
                  formats=("tflite", "tflite_int8")) -> tuple[dict, dict, set]:
    """The TFLite files ({format: path}), the formats TFLite cannot hold ({format: why}), and
    the formats whose file takes one example per call."""
    variants = {fmt: spec for fmt, spec in {"tflite": (f"{stem}.tflite", False),
                                            "tflite_int8": (f"{stem}-int8.tflite", True)}.items() if fmt in formats}
    if not variants:
        return {}, {}, set()
    if _takes_strings(model):
        # Checked: conversion stops at StringLower, StaticRegexReplace, StringSplitV2 and
        # RaggedTensorToTensor ("Some ops are not supported by the native TFLite runtime"),
        # which only a runtime bundling TF Select kernels could run.
        return {}, dict.fromkeys(variants, TFLITE_TEXT_REASON), set()
    files, unavailable, one_example = {}, {}, set()
    try:
        twin = _float32_twin(model)
        if twin is not None:
            model, saved_model_dir = twin, _export_saved_model(twin, workdir / "serving-float32")
    except Exception as exc:  # deserialisation and tracing raise many types; any means no file
        return {}, dict.fromkeys(variants, _unavailable(exc)), set()
    single = None
    try:
        for fmt, (filename, quantise) in variants.items():
            try:
                flatbuffer = _convert(saved_model_dir, quantise=quantise)
            except Exception as first:  # the converter and the runtime raise many types
                try:
                    single = single or _one_example_saved_model(model, workdir)
                    flatbuffer = _convert(single, quantise=quantise)
                    one_example.add(fmt)
                except Exception:
                    unavailable[fmt] = _unavailable(first)
                    continue
            files[fmt] = workdir / filename
            files[fmt].write_bytes(flatbuffer)
    finally:
        shutil.rmtree(workdir / "serving-one-example", ignore_errors=True)
        shutil.rmtree(workdir / "serving-float32", ignore_errors=True)
    return files, unavailable, one_example


def export_model(model, *, workdir: Path, name: str, version: int, formats=FORMATS) -> Exported:
    """The model in `formats` (all by default). Without TensorFlow here, the formats that need
    it are left `pending` for a conversion job; a conversion asks only for those."""
    workdir = Path(workdir)
    stem = f"{name}-v{version}"
    files: dict[str, Path] = {}
    if "keras" in formats:
        files["keras"] = workdir / f"{stem}.keras"
        model.save(files["keras"])
    wanted = [fmt for fmt in TENSORFLOW_FORMATS if fmt in formats]
    pending = wanted if wanted and not has_tensorflow() else []
    signature = {"keras": {"inputs": [_tensor_spec(t) for t in model.inputs],
                           "outputs": [_tensor_spec(t) for t in model.outputs]}}
    unavailable: dict[str, str] = {}
    one_example: set[str] = set()
    if wanted and not pending:
        serving_root = workdir / "serving"
        saved_model_dir = serving_root / name / str(version)
        _export_saved_model(model, saved_model_dir)
        if "savedmodel" in wanted:
            files["savedmodel"] = _zip_tree(serving_root, workdir / f"{stem}-savedmodel.zip")
        tflite_files, unavailable, one_example = _tflite_files(model, saved_model_dir, workdir, stem, wanted)
        files.update(tflite_files)
        signature["serving"] = _serving_signature(saved_model_dir)
        shutil.rmtree(serving_root, ignore_errors=True)
    described = describe_input(model)
    # Per format: what one call takes, for the download page.
    signature["input_description"] = {
        fmt: described + (" (one example per call: batch size 1)" if fmt in one_example else "") for fmt in files}
    # A copy of Exported.unavailable, so it is stored wherever the signature is.
    signature["unavailable"] = unavailable
    return Exported(files=files, signature=signature, unavailable=unavailable, pending=pending)
