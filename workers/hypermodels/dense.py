"""The built-in `dense` family: an MLP for vectors, and for images and sequences flattened; its default space is in
experiments/tuning/hypermodel_catalog.py, for the web."""

import keras

from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task, task_output


def _normalised_and_flat(inputs, data: DataInfo):
    # Tabular statistics are per flattened feature; image (per channel) and sequence (per
    # feature) statistics apply along the last axis, so those normalise before flattening.
    normalise = keras.layers.Normalization(mean=data.feature_mean, variance=data.feature_variance, name="normalise")
    if data.kind == "tabular":
        return normalise(keras.layers.Flatten()(inputs) if len(data.input_shape) > 1 else inputs)
    return keras.layers.Flatten()(normalise(inputs))


def build_dense(hp, data: DataInfo) -> keras.Model:
    # Images come in as raw uint8 pixels, so an exported model takes them as they are.
    dtype = "uint8" if data.kind == "image" else "float32"
    inputs = keras.Input(shape=data.input_shape, dtype=dtype, name="features")
    x = _normalised_and_flat(inputs, data)
    activation = hp.Choice("activation", ["relu", "tanh", "gelu"])
    dropout = hp.Float("dropout", 0.0, 0.5, step=0.1, default=0.0)
    batch_norm = hp.Boolean("batch_norm", default=False)
    units = hp.Int("units", 32, 256, step=32, default=64)
    for i in range(hp.Int("num_layers", 1, 3, default=1)):
        x = keras.layers.Dense(units, name=f"dense_{i}")(x)
        if batch_norm:
            x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Activation(activation)(x)
        if dropout > 0:
            x = keras.layers.Dropout(dropout)(x)
    model = keras.Model(inputs, task_output(x, data), name="dense")
    return compile_for_task(model, hp, data)
