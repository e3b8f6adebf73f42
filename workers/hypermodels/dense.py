"""The built-in `dense` family: an MLP for vector data (the default space is in
experiments/hypermodel_catalog.py so the web can show it without TensorFlow)."""

import keras

from workers.hypermodels.base import DataInfo


def _optimizer(hp):
    name = hp.Choice("optimizer", ["adam", "sgd", "rmsprop"])
    learning_rate = hp.Float("learning_rate", 1e-4, 1e-2, sampling="log", default=1e-3)
    if name == "sgd":
        with hp.conditional_scope("optimizer", ["sgd"]):
            momentum = hp.Float("momentum", 0.0, 0.9, step=0.1, default=0.0)
        return keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate=learning_rate)
    return keras.optimizers.Adam(learning_rate=learning_rate)


def build_dense(hp, data: DataInfo) -> keras.Model:
    inputs = keras.Input(shape=data.input_shape, name="features")
    x = keras.layers.Flatten()(inputs) if len(data.input_shape) > 1 else inputs
    x = keras.layers.Normalization(mean=data.feature_mean, variance=data.feature_variance, name="normalise")(x)
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
    if data.is_classification:
        outputs = keras.layers.Dense(data.n_classes, activation="softmax", name="probabilities")(x)
        loss, metrics = "sparse_categorical_crossentropy", ["accuracy"]
    else:
        outputs = keras.layers.Dense(1, name="prediction")(x)
        loss, metrics = "mse", ["mae"]
    model = keras.Model(inputs, outputs, name="dense")
    model.compile(optimizer=_optimizer(hp), loss=loss, metrics=metrics)
    return model
