"""A study's pruning settings: every rule with its message."""

import pytest

from experiments.tuning.pruning_options import PruningSettings, defaults_for, describe, pruning_errors


def errors(**values):
    values.setdefault("tuner", "random")
    values.setdefault("epochs", 10)
    return pruning_errors(**values)


def test_the_defaults_and_every_pruner_with_its_defaults_are_valid():
    assert errors() == {}
    for pruner in ("none", "median", "percentile", "successive_halving"):
        assert errors(pruner=pruner) == {}, pruner


def test_an_unknown_pruner_is_refused():
    assert errors(pruner="hyperband") == {
        "pruner": "Choose one of: none, median, percentile, successive_halving, pareto."}


def test_hyperband_refuses_a_pruner_and_says_why():
    assert "Hyperband already stops weak trials early" in errors(pruner="median", tuner="hyperband")["pruner"]
    assert errors(pruner="none", tuner="hyperband") == {}


@pytest.mark.parametrize("field,value", [
    ("pruning_startup_trials", -1), ("pruning_warmup_epochs", 1001), ("pruning_min_trials", 0),
    ("pruning_min_epochs", 0), ("pruning_reduction_factor", 1), ("pruning_min_trials", 2.5),
    ("pruning_startup_trials", True)])
def test_whole_number_settings_outside_their_range_are_refused(field, value):
    assert errors(pruner="median", **{field: value})[field].startswith("Must be a whole number from")


@pytest.mark.parametrize("value", [0, 100, -5, float("nan"), "25", True])
def test_the_percentile_must_lie_strictly_between_0_and_100(value):
    assert "above 0 and below 100" in errors(pruner="percentile", pruning_percentile=value)["pruning_percentile"]


def test_a_warmup_must_leave_an_epoch_to_judge_before_the_last():
    message = errors(pruner="median", pruning_warmup_epochs=9)["pruning_warmup_epochs"]
    assert message.startswith("With 10 epochs per trial the warm-up must be below 9")
    assert errors(pruner="median", pruning_warmup_epochs=8) == {}
    # Successive halving has no warm-up: its first rung plays that part.
    assert errors(pruner="successive_halving", pruning_warmup_epochs=9) == {}


def test_the_first_rung_must_come_before_the_last_epoch():
    message = errors(pruner="successive_halving", pruning_min_epochs=10)["pruning_min_epochs"]
    assert "min epochs must be below 10" in message
    assert errors(pruner="median", pruning_min_epochs=10) == {}  # not read by the median pruner


def test_pruning_needs_two_epochs():
    assert "at least 2 epochs" in errors(pruner="median", epochs=1, pruning_warmup_epochs=0)["pruner"]


def test_the_study_page_line_names_the_rule():
    assert describe(PruningSettings()) == "none"
    assert describe(PruningSettings(pruner="median")).startswith("median, after a warm-up of 1 epoch;")
    assert "best 1/3" in describe(PruningSettings(pruner="successive_halving"))
    assert "best 25 %" in describe(PruningSettings(pruner="percentile"))


def test_each_pruner_has_its_own_defaults_and_the_study_page_says_when_it_starts():
    assert defaults_for("median")["startup_trials"] == 5 and defaults_for(None)["pruner"] == "none"
    asha = PruningSettings.for_pruner("successive_halving")
    assert (asha.pruner, asha.startup_trials, asha.reduction_factor) == ("successive_halving", 0, 3)
    assert PruningSettings.for_pruner("pareto", startup_trials=2).startup_trials == 2  # a given value wins
    assert describe(asha).endswith("; from the first trials on, when at least 1 finished trial reached the epoch")
    assert "from 5 completed trials on" in describe(PruningSettings.for_pruner("median"))
