"""The built-in `cnn` family: a small convolutional network for images, taking raw uint8
pixels (rescaling and augmentation are layers of the model)."""

import keras

from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task, task_output


def _augmentation(hp, x):
    # Keras runs the Random* layers only when training=True: evaluation, predict and the
    # exported model see the images unchanged.
    if hp.Boolean("flip", default=False):
        x = keras.layers.RandomFlip("horizontal", name="random_flip")(x)
    rotation = hp.Float("rotation", 0.0, 0.2, step=0.05, default=0.0)
    if rotation > 0:
        x = keras.layers.RandomRotation(rotation, name="random_rotation")(x)
    zoom = hp.Float("zoom", 0.0, 0.2, step=0.05, default=0.0)
    if zoom > 0:
        x = keras.layers.RandomZoom(zoom, name="random_zoom")(x)
    return x


def build_cnn(hp, data: DataInfo) -> keras.Model:
    height, width = data.input_shape[:2]
    inputs = keras.Input(shape=data.input_shape, dtype="uint8", name="images")
    x = keras.layers.Rescaling(1 / 255, name="rescale")(inputs)
    x = _augmentation(hp, x)
    filters = hp.Int("filters", 16, 64, step=16, default=32)
    kernel_size = hp.Choice("kernel_size", [3, 5])
    batch_norm = hp.Boolean("batch_norm", default=False)
    pooling = hp.Choice("pooling", ["max", "avg"])
    dropout = hp.Float("dropout", 0.0, 0.5, step=0.1, default=0.0)
    for block in range(hp.Int("blocks", 1, 3, default=2)):
        x = keras.layers.Conv2D(filters * 2**block, kernel_size, padding="same", use_bias=not batch_norm,
                                name=f"conv_{block}")(x)
        if batch_norm:
            x = keras.layers.BatchNormalization(name=f"batch_norm_{block}")(x)
        x = keras.layers.Activation("relu")(x)
        # Halve the map only while it is larger than 2x2: 8x8 digits keep a 2x2 map after
        # two blocks, and a third block convolves that instead of pooling it away.
        if min(height, width) > 2:
            pool = keras.layers.MaxPooling2D if pooling == "max" else keras.layers.AveragePooling2D
            x = pool(2, padding="same", name=f"pool_{block}")(x)
            height, width = (height + 1) // 2, (width + 1) // 2
        if dropout > 0:
            x = keras.layers.Dropout(dropout)(x)
    if hp.Choice("head", ["global_average", "flatten"]) == "flatten":
        x = keras.layers.Flatten()(x)
    else:
        x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dense(hp.Int("dense_units", 32, 256, step=32, default=64), activation="relu", name="dense")(x)
    if dropout > 0:
        x = keras.layers.Dropout(dropout)(x)
    model = keras.Model(inputs, task_output(x, data), name="cnn")
    return compile_for_task(model, hp, data)
