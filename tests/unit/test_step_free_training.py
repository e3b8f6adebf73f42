"""A trial never reads a step's logs on the host (one device sync a step), on JAX and TensorFlow alike, and
the NaN stop and the time limit still end it with their reasons: within its first epoch, and for the time
limit a few steps after it passed. Each backend runs in a fresh process, as a worker child would."""

import pytest

from tests.backend_process import run_on_backend

PROBE = r'''
import json, sys
import keras, numpy as np
from keras.src.utils import python_utils
from workers.training.callbacks import EpochCallbacks, EpochReport, KeepBest, StopOnNaN, TimeLimit
from workers.training.fitting import DatasetArrays, TrialSpec, run_trial
from workers.trial_stops import TrialFailed

reads = []  # every time Keras turned a dict of logs into Python numbers: a device-to-host copy
pythonify = python_utils.pythonify_logs
python_utils.pythonify_logs = lambda logs: (reads.append(1) if logs else None, pythonify(logs))[1]

class Seen:
    def __init__(self):
        self.epochs = []
    def epoch_end(self, execution, epoch, logs):
        self.epochs.append(epoch)
        return True

class Steps(keras.callbacks.Callback):  # a step's start takes no logs: counting them reads nothing
    count = 0
    def on_train_batch_begin(self, batch, logs=None):
        Steps.count += 1

def build():
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(loss="mse", optimizer="sgd")
    return model

def arrays(rows, nan=False):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 2)).astype("float32")
    y = x[:, :1] * 2
    if nan:
        y[rows // 2] = np.nan
    return DatasetArrays(x, y, x[:32], y[:32], x[:32], y[:32])

def spec(**overrides):
    return TrialSpec(**{"objective": "val_loss", "direction": "min", "epochs": 3, "batch_size": 8, "patience": 5,
                        "executions": 1, "seed": 1, **overrides})

out = {"backend": keras.backend.backend()}
seen = Seen()
run_trial(build=build, spec=spec(), data=arrays(320), reporter=seen, workdir=sys.argv[1])
out["epochs"], out["reads"], out["steps"] = seen.epochs, len(reads), 3 * 320 // 8

def trial_callbacks():
    return [EpochReport(lambda *a: True), StopOnNaN(), KeepBest("val_loss", "min", 5), TimeLimit(60)]

step_loss = keras.ops.convert_to_tensor(np.ones(()))  # on the device, as a step leaves it
lists = {"keras": keras.callbacks.CallbackList(trial_callbacks(), model=build()),
         "ours": EpochCallbacks(trial_callbacks(), model=build(), epochs=1)}
for name, callbacks in lists.items():
    before = len(reads)
    callbacks.on_train_begin()
    try:
        callbacks.on_train_batch_end(0, {"loss": step_loss})
        callbacks.on_train_end()
        out[name + "_step_reads"] = len(reads) - before
    except Exception as exc:
        out[name + "_step_reads"] = f"{type(exc).__name__}: {exc}"

seen = Seen()
try:
    run_trial(build=build, spec=spec(epochs=5), data=arrays(320, nan=True), reporter=seen, workdir=sys.argv[1])
except TrialFailed as exc:
    out["nan"] = [str(exc), seen.epochs]

def counting_fit(model, callbacks, **kwargs):  # Keras's fit with the same list, and a step counter in it
    return model.fit(callbacks=EpochCallbacks([*callbacks, Steps()], model=model, epochs=kwargs["epochs"]), **kwargs)

seen = Seen()
try:
    run_trial(build=build, spec=spec(epochs=50, batch_size=2, time_limit_seconds=0.5), data=arrays(100000),
              reporter=seen, workdir=sys.argv[1], fit=counting_fit)
except TrialFailed as exc:
    out["time_limit"] = [str(exc), seen.epochs, Steps.count, 100000 // 2]
print("RESULT " + json.dumps(out))
'''


@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_trial_reads_no_steps_logs_and_still_stops_on_nan_and_its_time_limit(backend, tmp_path):
    out = run_on_backend(backend, PROBE, str(tmp_path))
    assert out["backend"] == backend
    # 120 steps in 3 epochs: the logs were read per epoch (its end, its validation), never per step.
    assert out["epochs"] == [0, 1, 2] and out["reads"] <= 3 * 4, out
    # Keras's own list reads a step's logs (on JAX in a thread, where it races the state the next step donates);
    # ours does not.
    assert out["keras_step_reads"] == 1, out
    assert out["ours_step_reads"] == 0, out
    message, epochs = out["nan"]
    assert message.startswith("The loss became nan at epoch 1") and epochs == [0], out
    message, epochs, steps, steps_per_epoch = out["time_limit"]
    assert "longer than the limit of 0 s" in message and epochs == [0], out
    assert steps < steps_per_epoch, out  # stopped inside its first epoch, soon after the limit
