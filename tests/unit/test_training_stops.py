"""When training stops early: the time limit (TUNEBOARD_MAX_TRIAL_SECONDS) fails the trial with
that reason, and a stop that arrives with the last epoch keeps the completed result."""

import keras
import numpy as np
import pytest

from workers.training.fitting import DatasetArrays, TrialSpec, run_trial
from workers.trial_stops import TrialCancelled, TrialFailed


class StopAt:
    """A reporter whose answer turns False at `epoch` (the study was cancelled then)."""

    def __init__(self, epoch=None):
        self.stop_epoch, self.seen = epoch, []

    def epoch_end(self, execution, epoch, logs):
        self.seen.append(epoch)
        return self.stop_epoch is None or epoch < self.stop_epoch


def build():
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(loss="mse", optimizer="sgd")
    return model


def data(rows=64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 2)).astype("float32")
    y = x[:, :1] * 2
    return DatasetArrays(x, y, x, y, x, y)


def spec(**overrides):
    return TrialSpec(**{"objective": "val_loss", "direction": "min", "epochs": 3, "batch_size": 8, "patience": 5,
                        "executions": 1, "seed": 1, **overrides})


def test_a_trial_over_its_time_limit_fails_with_that_reason(tmp_path):
    reporter = StopAt()
    with pytest.raises(TrialFailed, match="longer than the limit of 0 s .TUNEBOARD_MAX_TRIAL_SECONDS."):
        run_trial(build=build, spec=spec(epochs=50, time_limit_seconds=0), data=data(), reporter=reporter,
                  workdir=tmp_path)
    assert reporter.seen == [0]  # stopped in its first epoch, after one batch


def test_a_stop_with_the_last_epoch_keeps_the_result(tmp_path):
    result = run_trial(build=build, spec=spec(), data=data(), reporter=StopAt(epoch=2), workdir=tmp_path)
    assert result.checkpoint_path.exists() and np.isfinite(result.score)


def test_a_stop_before_the_last_epoch_cancels(tmp_path):
    reporter = StopAt(epoch=1)
    with pytest.raises(TrialCancelled):
        run_trial(build=build, spec=spec(), data=data(), reporter=reporter, workdir=tmp_path)
    assert reporter.seen == [0, 1]


@pytest.mark.parametrize(("last_epoch", "failed"), [(0, True), (2, False)])
def test_a_limit_passing_in_the_last_epoch_keeps_the_complete_result(last_epoch, failed):
    import time
    import types

    from workers.training.callbacks import TimeLimit

    limit = TimeLimit(0)
    model = types.SimpleNamespace(stop_training=False)
    limit.set_model(model)
    limit.set_params({"epochs": 3})
    limit.on_train_begin()
    deadline = time.monotonic() + 5
    while not model.stop_training and time.monotonic() < deadline:  # the timer thread fires at once
        time.sleep(0.01)
    limit.on_epoch_end(last_epoch)
    limit.on_train_end()
    assert model.stop_training and limit.exceeded is failed

