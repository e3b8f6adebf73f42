"""The pruners' decisions: pure functions of the settings and the values read from the database."""

import math

import pytest

from experiments.tuning import pruners
from experiments.tuning.pruning_options import PruningSettings

MEDIAN = PruningSettings(pruner="median", startup_trials=0, warmup_epochs=0, min_trials=1)


def decide(settings=MEDIAN, *, direction="min", epoch=2, value, others, completed=10, last=False, execution=0):
    return pruners.decide(settings=settings, direction=direction, execution=execution, epoch=epoch, value=value,
                          others=others, completed=completed, last=last)


def test_percentile_interpolates_linearly_like_numpy():
    values = [4.0, 1.0, 3.0, 2.0]
    assert pruners.percentile(values, 50) == pytest.approx(2.5)
    assert pruners.percentile(values, 25) == pytest.approx(1.75)
    assert pruners.percentile(values, 0) == 1.0 and pruners.percentile(values, 100) == 4.0
    assert pruners.percentile([7.0], 30) == 7.0


def test_best_so_far_follows_the_direction_and_ignores_missing_values():
    assert pruners.best_so_far(None, 0.5, "min") == 0.5
    assert pruners.best_so_far(0.4, 0.5, "min") == 0.4
    assert pruners.best_so_far(0.4, 0.5, "max") == 0.5
    assert pruners.best_so_far(0.4, None, "max") == 0.4


def test_objective_value_takes_only_finite_numbers():
    assert pruners.objective_value({"val_loss": 0.3}, "val_loss") == 0.3
    assert pruners.objective_value({"val_loss": math.nan}, "val_loss") is None
    assert pruners.objective_value({"val_loss": True}, "val_loss") is None
    assert pruners.objective_value({"loss": 0.3}, "val_loss") is None


def test_median_prunes_a_trial_worse_than_the_median_when_minimising():
    decision = decide(value=0.9, others=[0.2, 0.4, 0.6])
    assert decision.prune and decision.reason == pruners.PRUNED
    assert decision.threshold == pytest.approx(0.4) and decision.compared == 3


def test_median_keeps_a_trial_at_or_better_than_the_median():
    assert not decide(value=0.4, others=[0.2, 0.4, 0.6]).prune  # a tie is kept
    assert decide(value=0.3, others=[0.2, 0.4, 0.6]).reason == pruners.KEPT


def test_median_when_maximising_prunes_the_lower_values():
    assert decide(direction="max", value=0.5, others=[0.6, 0.7, 0.9]).prune
    assert not decide(direction="max", value=0.8, others=[0.6, 0.7, 0.9]).prune


def test_percentile_keeps_only_the_best_share():
    quarter = PruningSettings(pruner="percentile", percentile=25.0, startup_trials=0, warmup_epochs=0)
    others = [0.1, 0.2, 0.3, 0.4, 0.5]  # 25th percentile (minimising): 0.2
    assert decide(quarter, value=0.25, others=others).prune  # better than the median, not in the best quarter
    assert not decide(quarter, value=0.2, others=others).prune
    # Maximising, the best quarter lies above the 75th percentile: 0.4.
    assert decide(quarter, direction="max", value=0.35, others=others).prune
    assert not decide(quarter, direction="max", value=0.45, others=others).prune


def test_no_decision_during_warmup_startup_or_with_too_few_trials():
    settings = PruningSettings(pruner="median", startup_trials=3, warmup_epochs=2, min_trials=2)
    bad = {"value": 9.0, "others": [0.1, 0.2]}
    assert decide(settings, epoch=2, completed=5, **bad).reason == pruners.WARMUP
    assert decide(settings, epoch=3, completed=2, **bad).reason == pruners.STARTUP
    assert decide(settings, epoch=3, completed=5, value=9.0, others=[0.1]).reason == pruners.TOO_FEW
    assert decide(settings, epoch=3, completed=5, **bad).prune


def test_the_last_epoch_is_never_judged_and_no_value_is_never_pruned():
    assert decide(value=9.0, others=[0.1], last=True).reason == pruners.LAST_EPOCH
    assert decide(value=None, others=[0.1]).reason == pruners.NO_VALUE
    assert decide(PruningSettings(), value=9.0, others=[0.1]).reason == pruners.DISABLED


def test_successive_halving_rungs_are_min_epochs_times_powers_of_the_factor():
    settings = PruningSettings(pruner="successive_halving", min_epochs=2, reduction_factor=3)
    assert [e for e in range(1, 60) if pruners.rung_of(e, settings) is not None] == [2, 6, 18, 54]
    assert pruners.rung_of(6, settings) == 1


def test_successive_halving_keeps_the_best_third_at_a_rung_and_ignores_other_epochs():
    settings = PruningSettings(pruner="successive_halving", startup_trials=0, min_epochs=1, reduction_factor=3)
    others = [0.1, 0.2, 0.3, 0.4, 0.5]  # with the trial: 6 at the rung, the best 2 go on
    assert not decide(settings, epoch=3, value=0.15, others=others).prune
    pruned = decide(settings, epoch=3, value=0.25, others=others)
    assert pruned.prune and pruned.rung == 1 and pruned.threshold == pytest.approx(0.2)
    assert decide(settings, epoch=2, value=0.9, others=others).reason == pruners.NOT_A_RUNG


def test_successive_halving_with_fewer_trials_than_the_factor_keeps_only_the_best():
    settings = PruningSettings(pruner="successive_halving", startup_trials=0, min_epochs=1, reduction_factor=3)
    assert not decide(settings, direction="max", epoch=1, value=0.8, others=[0.7]).prune
    assert decide(settings, direction="max", epoch=1, value=0.6, others=[0.7]).prune


def test_decisions_depend_only_on_their_inputs():
    others = [0.3, 0.1, 0.5, 0.2, 0.4]
    first = decide(value=0.35, others=others)
    assert all(decide(value=0.35, others=list(reversed(others))) == first for _ in range(3))


def test_a_pruned_trial_is_explained_in_words():
    record = decide(value=0.9, others=[0.2, 0.4, 0.6], epoch=3).record()
    text = pruners.explain(record, "val_loss")
    assert text == ("Pruned after epoch 3: its best val_loss so far, 0.9, was worse than the median (0.4) of 3 "
                    "finished trials at that epoch.")
    asha = PruningSettings(pruner="successive_halving", startup_trials=0, min_epochs=1, reduction_factor=2)
    assert "rung 0" in pruners.explain(decide(asha, epoch=1, value=0.9, others=[0.1]).record(), "val_loss")
    assert pruners.explain({}, "val_loss") == ""
