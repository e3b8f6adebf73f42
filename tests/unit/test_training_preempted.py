"""A trial preempted at an epoch end goes on in its next attempt with its optimizer as it was: the
step count and Adam's moments carried, not restarted cold."""

import keras
import numpy as np
import pytest

from experiments.services.trial_epochs import EpochVerdict
from tests.unit.test_training_stops import data, spec
from workers.training.fitting import run_trial
from workers.trial_stops import TrialFailed, TrialPreempted

ROWS, BATCH = 64, 8


def build():
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(loss="mse", optimizer=keras.optimizers.Adam(0.01))
    return model


class PreemptAt:
    def __init__(self, epoch: int | None):
        self.at, self.seen = epoch, []

    def epoch_end(self, execution, epoch, logs):
        self.seen.append(epoch)
        return EpochVerdict(False, preempted=True) if epoch == self.at else EpochVerdict(True)


def test_the_resumed_attempt_starts_with_the_optimizer_state_the_preempted_one_left(tmp_path):
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with pytest.raises(TrialPreempted) as stopped:
        run_trial(build=build, spec=spec(epochs=5, batch_size=BATCH), data=data(ROWS), reporter=PreemptAt(1),
                  workdir=tmp_path / "first")
    resume = stopped.value.resume
    assert resume.epoch == 2 and resume.optimizer is not None and resume.optimizer.exists()
    seen_at_start = {}

    def fit(model, **kwargs):
        optimizer = model.optimizer
        seen_at_start["iterations"] = int(keras.ops.convert_to_numpy(optimizer.iterations))
        seen_at_start["moments"] = [keras.ops.convert_to_numpy(v) for v in optimizer.variables
                                    if "momentum" in v.path or "velocity" in v.path]
        return model.fit(**kwargs)

    reporter = PreemptAt(None)
    result = run_trial(build=build, spec=spec(epochs=5, batch_size=BATCH), data=data(ROWS), reporter=reporter,
                       workdir=tmp_path / "second", resume=resume, fit=fit)
    assert reporter.seen == [2, 3, 4] and result.epochs_trained == 5
    assert seen_at_start["iterations"] == 2 * ROWS // BATCH, "two epochs of steps carried"
    assert seen_at_start["moments"] and all(np.any(m != 0) for m in seen_at_start["moments"])


def test_the_time_limit_is_one_budget_across_the_preempted_and_the_resumed_attempt(tmp_path):
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    with pytest.raises(TrialPreempted) as stopped:
        run_trial(build=build, spec=spec(epochs=50, batch_size=BATCH, time_limit_seconds=600), data=data(ROWS),
                  reporter=PreemptAt(0), workdir=tmp_path / "first")
    resume = stopped.value.resume
    assert 0 < resume.spent_seconds < 600
    resume.spent_seconds = 600  # as if the first attempt had used the whole budget
    with pytest.raises(TrialFailed, match="longer than the limit of 600 s"):
        run_trial(build=build, spec=spec(epochs=50, batch_size=BATCH, time_limit_seconds=600), data=data(ROWS),
                  reporter=PreemptAt(None), workdir=tmp_path / "second", resume=resume)
