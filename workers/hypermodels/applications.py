"""KerasTuner's application hypermodels (keras_tuner.applications) as built-in families for
images: HyperResNet and HyperXception, randomly initialised (worker hosts may be offline).

Each takes raw uint8 pixels, rescales them to 0..1 and enlarges images smaller than
MIN_SIDE, uses the application without its top (`include_top=False`), and ends like the other
built-ins: our float32 output layer, loss and optimizer hyperparameters, which also gives
them a regression head. The application's own hyperparameters (version, conv3_depth, ...)
keep KerasTuner's names, which experiments/tuning/hypermodel_catalog.py lists.

HyperEfficientNet is not offered. Its build() calls
keras.applications.EfficientNetBx(include_top=False, input_tensor=x) without a `weights`
argument, so the default weights="imagenet" applies and cannot be overridden; without
internet access every build fails (keras-tuner 1.4.8, Keras 3.15.1, TensorFlow 2.21):
    Exception: URL fetch failure on
    https://storage.googleapis.com/keras-applications/efficientnetb0_notop.h5: None --
    [Errno -2] Name or service not known
It would also enlarge every image to 224-600 pixels (the ImageNet sizes of B0-B7).
"""

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
