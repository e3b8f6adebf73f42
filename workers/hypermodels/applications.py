"""KerasTuner's HyperResNet and HyperXception as built-in image families, randomly initialised because worker
hosts may be offline (why HyperEfficientNet is not: docs/design/datasets-and-models.md)."""

import keras
from keras_tuner.applications import HyperResNet, HyperXception

from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task, task_output

# Both build and train on inputs down to 1x1 (their convolutions pad), but ResNet halves the
# map five times: below 32x32 its last stages would convolve padding.
MIN_SIDE = 32


def _application(application, hp, data: DataInfo, name: str) -> keras.Model:
    height, width = data.input_shape[:2]
    inputs = keras.Input(shape=data.input_shape, dtype="uint8", name="images")
    x = keras.layers.Rescaling(1 / 255, name="rescale")(inputs)
    if min(height, width) < MIN_SIDE:
        x = keras.layers.Resizing(max(height, MIN_SIDE), max(width, MIN_SIDE), name="enlarge")(x)
    features = application(include_top=False, input_tensor=x).build(hp).output
    dropout = hp.Float("dropout", 0.0, 0.5, step=0.1, default=0.0)
    if dropout > 0:
        features = keras.layers.Dropout(dropout, name="top_dropout")(features)
    model = keras.Model(inputs, task_output(features, data), name=name)
    return compile_for_task(model, hp, data)


def build_resnet(hp, data: DataInfo) -> keras.Model:
    return _application(HyperResNet, hp, data, "resnet")


def build_xception(hp, data: DataInfo) -> keras.Model:
    return _application(HyperXception, hp, data, "xception")
