"""What every built-in hypermodel ends with (output layer, loss, metrics, optimizer hyperparameters), written once
so each family's default space lists the same rows."""

import keras

from workers.hypermodels.base import DataInfo


def optimizer(hp) -> keras.optimizers.Optimizer:
    name = hp.Choice("optimizer", ["adam", "sgd", "rmsprop"])
    learning_rate = hp.Float("learning_rate", 1e-4, 1e-2, sampling="log", default=1e-3)
    if name == "sgd":
        with hp.conditional_scope("optimizer", ["sgd"]):
            momentum = hp.Float("momentum", 0.0, 0.9, step=0.1, default=0.0)
        return keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(learning_rate=learning_rate)
    return keras.optimizers.Adam(learning_rate=learning_rate)


def task_output(x, data: DataInfo):
    """Class probabilities ("probabilities", softmax) or one value ("prediction"). float32
    even under a mixed-precision policy: a bfloat16 softmax neither sums to 1 nor gives the
    loss the precision it needs."""
    if data.is_classification:
        return keras.layers.Dense(data.n_classes, activation="softmax", dtype="float32", name="probabilities")(x)
    return keras.layers.Dense(1, dtype="float32", name="prediction")(x)


def compile_for_task(model: keras.Model, hp, data: DataInfo) -> keras.Model:
    if data.is_classification:
        loss, metrics = "sparse_categorical_crossentropy", ["accuracy"]
    else:
        loss, metrics = "mse", ["mae"]
    model.compile(optimizer=optimizer(hp), loss=loss, metrics=metrics)
    return model
