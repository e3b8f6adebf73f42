"""A trained model's TFLite files (float32, dynamic-range int8), each run once in the TFLite runtime, so a model
TFLite cannot hold gets a reason instead of a file."""

import shutil
from pathlib import Path

import keras
import numpy as np

from workers.export.quantization import interpreter as runtime_interpreter
from workers.export.saved_model import export_saved_model, tensorflow

TFLITE_TEXT_REASON = (
    "TFLite cannot hold this model's text preprocessing (TextVectorization uses string ops the TFLite "
    "runtime lacks); use the SavedModel or .keras file."
)


def _takes_strings(model) -> bool:
    return any(str(getattr(t.dtype, "name", t.dtype)) == "string" for t in model.inputs)


def _runs(flatbuffer: bytes) -> None:
    """Raises unless the TFLite runtime can load the model and run it once on zeros: a
    converted file that cannot run in the runtime is not worth offering."""
    interpreter, _ = runtime_interpreter(flatbuffer)
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
    tf = tensorflow()
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
    """The same model computing in float32 (None when it already does), since TFLite has no kernels for mixed
    precision's bfloat16/float16."""
    config, changed = _float32_config(keras.saving.serialize_keras_object(model))
    if not changed:
        return None
    # safe_mode=False lets ResNeXt's Lambda layers through: the config comes from the model
    # in memory, not from a file someone sent.
    twin = keras.saving.deserialize_keras_object(config, safe_mode=False)
    twin.set_weights(model.get_weights())
    return twin


def _one_example_saved_model(model, workdir: Path) -> Path:
    """The model exported for batches of exactly one, since LSTM and GRU layers only convert to TFLite with a static
    batch size."""
    return export_saved_model(model, workdir / "serving-one-example", batch_size=1)


def _unavailable(exc: Exception) -> str:
    return f"TFLite cannot hold this model ({_reason(exc)}); use the SavedModel or .keras file."


def tflite_files(model, saved_model_dir: Path, workdir: Path, stem: str,
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
            model, saved_model_dir = twin, export_saved_model(twin, workdir / "serving-float32")
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
