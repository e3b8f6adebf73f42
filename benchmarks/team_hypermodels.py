"""A second model family for tabular data, written as a team would write one for its workers
(TUNEBOARD_HYPERMODELS="logistic=benchmarks.team_hypermodels:build_logistic"): multinomial
logistic regression with an L2 penalty on normalised inputs. Tabular data has only the built-in
`dense` family; a recipe over studies of two families needs another, and a linear model errs
differently from an MLP, which is what an ensemble needs of its members."""

import keras

from experiments.tuning.hypermodel_catalog import OPTIMIZER_ROWS
from workers.hypermodels.base import DataInfo
from workers.hypermodels.compiling import compile_for_task

# Its search space, as a study's rows (experiments/tuning/search_space.py): the penalty, then the
# optimizer rows every built-in shares (compile_for_task declares them).
LOGISTIC_SPACE = [
    {"name": "l2", "type": "float", "min": 1e-5, "max": 1e-1, "step": None, "sampling": "log",
     "parent": None, "parent_values": []},
    *OPTIMIZER_ROWS,
]


def build_logistic(hp, data: DataInfo) -> keras.Model:
    inputs = keras.Input(shape=data.input_shape, dtype="float32", name="features")
    x = keras.layers.Flatten()(inputs) if len(data.input_shape) > 1 else inputs
    x = keras.layers.Normalization(mean=data.feature_mean, variance=data.feature_variance, name="normalise")(x)
    penalty = keras.regularizers.L2(hp.Float("l2", 1e-5, 1e-1, sampling="log", default=1e-3))
    # compiling.task_output's head with the penalty on its kernel: the model is that one layer.
    if data.is_classification:
        head = keras.layers.Dense(data.n_classes, activation="softmax", dtype="float32", name="probabilities",
                                  kernel_regularizer=penalty)(x)
    else:
        head = keras.layers.Dense(1, dtype="float32", name="prediction", kernel_regularizer=penalty)(x)
    model = keras.Model(inputs, head, name="logistic")
    return compile_for_task(model, hp, data)
