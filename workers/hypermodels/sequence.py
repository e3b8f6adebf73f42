"""The built-in `sequence` family: recurrent (LSTM, GRU) or convolutional layers over float
sequences of shape (time steps, features), normalised per feature inside the model."""

import keras

from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task, task_output

RECURRENT = ["lstm", "gru"]


def _layer(hp, layer_type: str, units: int, last: bool, index: int):
    if layer_type == "conv1d":
        with hp.conditional_scope("layer_type", ["conv1d"]):
            kernel_size = hp.Choice("kernel_size", [3, 5], default=3)
        return keras.layers.Conv1D(units, kernel_size, padding="same", activation="relu", name=f"conv_{index}")
    with hp.conditional_scope("layer_type", RECURRENT):
        bidirectional = hp.Boolean("bidirectional", default=False)
    recurrent = keras.layers.LSTM if layer_type == "lstm" else keras.layers.GRU
    # Every recurrent layer but the last hands the whole sequence on; the last one summarises it.
    layer = recurrent(units, return_sequences=not last)
    return keras.layers.Bidirectional(layer, name=f"{layer_type}_{index}") if bidirectional else layer


def build_sequence(hp, data: DataInfo) -> keras.Model:
    inputs = keras.Input(shape=data.input_shape, name="sequences")
    x = keras.layers.Normalization(mean=data.feature_mean, variance=data.feature_variance, name="normalise")(inputs)
    layer_type = hp.Choice("layer_type", ["lstm", "gru", "conv1d"])
    units = hp.Int("units", 16, 128, step=16, default=32)
    dropout = hp.Float("dropout", 0.0, 0.5, step=0.1, default=0.0)
    count = hp.Int("num_layers", 1, 3, default=1)
    for index in range(count):
        x = _layer(hp, layer_type, units, last=index == count - 1, index=index)(x)
        if dropout > 0:
            x = keras.layers.Dropout(dropout)(x)
    if layer_type == "conv1d":
        x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, task_output(x, data), name="sequence")
    return compile_for_task(model, hp, data)
