"""A trial its pruner stops: training ends at that epoch with a result (the best so far, its
checkpoint, the epochs trained), and the executions left are not run."""

import numpy as np

from experiments.services.trial_epochs import EpochVerdict
from tests.unit.test_training_stops import build, data, spec
from workers.training.fitting import run_trial

DECISION = {"prune": True, "reason": "pruned", "pruner": "median", "epoch": 2}


class PruneAt:
    """Answers like the per-epoch record call: go on, until the pruner stops the trial at `epoch`."""

    def __init__(self, execution: int, epoch: int):
        self.at, self.seen = (execution, epoch), []

    def epoch_end(self, execution, epoch, logs):
        self.seen.append((execution, epoch, logs["val_loss"]))
        if (execution, epoch) == self.at:
            return EpochVerdict(False, pruned=DECISION)
        return EpochVerdict(True)


def test_a_pruned_trial_stops_at_that_epoch_with_its_best_so_far(tmp_path):
    reporter = PruneAt(0, 1)
    result = run_trial(build=build, spec=spec(epochs=6), data=data(), reporter=reporter, workdir=tmp_path)
    assert [(e, n) for e, n, _ in reporter.seen] == [(0, 0), (0, 1)]
    assert result.pruned == DECISION and result.epochs_trained == 2
    assert result.score == min(loss for _, _, loss in reporter.seen)
    assert result.checkpoint_path.exists() and result.best_step in (0, 1)


def test_a_pruned_execution_skips_the_executions_left(tmp_path):
    reporter = PruneAt(1, 0)
    result = run_trial(build=build, spec=spec(epochs=3, executions=3), data=data(), reporter=reporter,
                       workdir=tmp_path)
    assert sorted({e for e, _, _ in reporter.seen}) == [0, 1]  # the third execution never ran
    assert result.epochs_trained == 4 and result.pruned == DECISION
    first = min(loss for e, _, loss in reporter.seen if e == 0)
    assert np.isclose(result.score, np.mean([first, reporter.seen[-1][2]]))


def test_a_trial_never_pruned_completes_as_before(tmp_path):
    result = run_trial(build=build, spec=spec(epochs=3), data=data(), reporter=PruneAt(9, 9), workdir=tmp_path)
    assert result.pruned is None and result.epochs_trained == 3
