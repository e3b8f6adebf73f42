"""run_trial keeps the best epoch's weights, stops after `patience` epochs without
improvement, and Hyperband's warm start restores a checkpoint into a rebuilt model."""

import keras
import numpy as np
import pytest

from workers.training import checkpoints
from workers.training.fitting import DatasetArrays, TrialSpec, run_trial
from workers.trial_stops import TrialFailed

LOSSES = [3.0, 1.0, 2.0, 2.5, 0.5]  # best at epoch 1; patience 2 stops at epoch 3, before the 0.5


class Reporter:
    def __init__(self):
        self.epochs = []

    def epoch_end(self, execution, epoch, logs):
        self.epochs.append((execution, epoch, logs["val_loss"]))
        return True


def build(units=3):
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    model.compile(loss="mse")
    return model


def scripted_fit(model, *, callbacks, epochs, initial_epoch, **kwargs):
    """Each epoch sets the kernel to the epoch number and reports a scripted loss."""
    callbacks = keras.callbacks.CallbackList(callbacks, model=model)
    callbacks.on_train_begin()
    for epoch in range(initial_epoch, epochs):
        kernel, bias = model.get_weights()
        model.set_weights([np.full_like(kernel, epoch), bias])
        callbacks.on_epoch_end(epoch, {"loss": LOSSES[epoch], "val_loss": LOSSES[epoch]})
        if model.stop_training:
            break
    callbacks.on_train_end()


def data():
    x = np.zeros((4, 2), "float32")
    return DatasetArrays(x, x[:, :1], x, x[:, :1], x, x[:, :1])


def spec(**overrides):
    return TrialSpec(**{"objective": "val_loss", "direction": "min", "epochs": 5, "batch_size": 2, "patience": 2,
                        "executions": 1, "seed": 1, **overrides})


def test_checkpoint_holds_the_best_epochs_weights_and_training_stops_after_patience(tmp_path):
    reporter = Reporter()
    result = run_trial(build=build, spec=spec(), data=data(), reporter=reporter, workdir=tmp_path, fit=scripted_fit)
    assert [epoch for _, epoch, _ in reporter.epochs] == [0, 1, 2, 3]
    assert result.best_step == 1 and result.score == 1.0
    assert result.checkpoint_path.name.endswith(checkpoints.SUFFIX)
    kernel, bias = checkpoints.load_weights(result.checkpoint_path)
    assert np.all(kernel == 1.0) and kernel.shape == (2, 3)


def test_maximised_objective_keeps_the_highest_epoch(tmp_path):
    result = run_trial(build=build, spec=spec(direction="max", patience=10), data=data(), reporter=Reporter(),
                       workdir=tmp_path, fit=scripted_fit)
    assert result.best_step == 0  # 3.0 is the highest scripted value
    assert np.all(checkpoints.load_weights(result.checkpoint_path)[0] == 0.0)


def test_warm_start_restores_the_checkpoint_into_a_rebuilt_model(tmp_path):
    first = run_trial(build=build, spec=spec(), data=data(), reporter=Reporter(), workdir=tmp_path, fit=scripted_fit)
    seen = []

    def fit_recording_start(model, **kwargs):
        seen.append(model.get_weights()[0].copy())
        return scripted_fit(model, **kwargs)

    (tmp_path / "round2").mkdir()
    run_trial(build=build, spec=spec(initial_epoch=4), data=data(), reporter=Reporter(), workdir=tmp_path / "round2",
              warm_start=first.checkpoint_path, fit=fit_recording_start)
    assert np.all(seen[0] == 1.0)


def test_a_checkpoint_that_does_not_fit_the_model_fails_the_trial_with_a_reason(tmp_path):
    first = run_trial(build=build, spec=spec(), data=data(), reporter=Reporter(), workdir=tmp_path, fit=scripted_fit)
    with pytest.raises(TrialFailed, match="was the hypermodel changed"):
        run_trial(build=lambda: build(units=4), spec=spec(), data=data(), reporter=Reporter(), workdir=tmp_path,
                  warm_start=first.checkpoint_path, fit=scripted_fit)
