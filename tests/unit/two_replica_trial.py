"""Run by tests/unit/test_compute.py in a fresh process: a trial on two logical CPU devices.

Logical devices must exist before TensorFlow initialises, as in a worker child
(TUNEBOARD_CPU_DEVICES); prints the trial's compute record and score as JSON."""

import json
import sys
import tempfile
from pathlib import Path

from workers.host.backends.child import configure_child

configure_child("tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from experiments.tuning.compute_options import ComputeSettings  # noqa: E402
from workers.training.fitting import DatasetArrays, TrialSpec, run_trial  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


class Reporter:
    def epoch_end(self, execution, epoch, logs):
        return True


def build():
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(1, dtype="float32")(keras.layers.Dense(8, activation="relu")(inputs))
    model = keras.Model(inputs, outputs)
    model.compile(optimizer="adam", loss="mse")
    return model


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    data = DatasetArrays(x, y, x, y, x, y)
    spec = TrialSpec(objective="val_loss", direction="min", epochs=2, batch_size=8, patience=5, executions=1, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        result = run_trial(build=build, spec=spec, data=data, reporter=Reporter(), workdir=Path(tmp),
                           compute=ComputeSettings(queue="cpu", devices_per_trial=2))
    json.dump({"compute": result.compute, "score": result.score}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
