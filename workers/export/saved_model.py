"""A trained model's SavedModel in TF Serving's layout, inputs and outputs named by position (serving/contract.py)
so versions stay interchangeable; TensorFlow imported only when called."""

import zipfile
from pathlib import Path

import keras

from experiments.serving.contract import input_key, output_key


def tensorflow():
    import tensorflow as tf  # only the formats that need it load it (a JAX worker has none)

    return tf


def tensor_spec(tensor) -> dict:
    name = getattr(tensor, "name", "") or ""
    return {"name": name.split(":")[0], "shape": [None if d is None else int(d) for d in tensor.shape],
            "dtype": str(getattr(tensor.dtype, "name", tensor.dtype))}


def _by_position(items) -> list:
    # input_2 before input_10: the keys are `<kind>_<position>`, so shorter is earlier.
    return sorted(items, key=lambda item: (len(item[0]), item[0]))


def serving_signature(saved_model_dir: Path) -> dict:
    serving = tensorflow().saved_model.load(str(saved_model_dir)).signatures["serving_default"]
    _, inputs = serving.structured_input_signature
    return {
        "name": "serving_default",
        "inputs": [tensor_spec(spec) | {"name": key} for key, spec in _by_position(inputs.items())],
        "outputs": [tensor_spec(spec) | {"name": key}
                    for key, spec in _by_position(serving.structured_outputs.items())],
    }


def zip_tree(root: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(root.rglob("*")):
            archive.write(path, path.relative_to(root))
    return target


def export_saved_model(model, target: Path, *, batch_size: int | None = None) -> Path:
    """The model's inference pass as a SavedModel, not model.export(), which serves with training=True (augmentation
    layers would alter every served image)."""
    specs = [tensorflow().TensorSpec((batch_size, *t.shape[1:]), t.dtype, name=input_key(position))
             for position, t in enumerate(model.inputs)]

    def serve(inputs):
        outputs = keras.tree.flatten(model(inputs, training=False))
        return {output_key(position): tensor for position, tensor in enumerate(outputs)}

    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", serve, input_signature=[specs[0] if len(specs) == 1 else specs])
    archive.write_out(str(target), verbose=False)
    return target
