"""The stopping rules on their own: when a target or a plateau says stop, and the messages that
refuse a setting (the service, the form and the API all show these)."""

import math

import pytest

from experiments.tuning.stopping_rules import StoppingRules, budget_reason, describe, stop_reason, stopping_errors


def reason(rules, scores, direction="max"):
    return stop_reason(rules, results=list(enumerate(scores, start=1)), direction=direction, metric="m")


def test_no_rule_never_stops():
    assert reason(StoppingRules(), [0.1, 0.1, 0.1, 0.1]) is None


def test_a_target_is_met_at_or_beyond_it_in_the_objectives_direction():
    assert reason(StoppingRules(target=0.9), [0.5, 0.89]) is None
    assert reason(StoppingRules(target=0.9), [0.5, 0.9]) == "Stopped early: m reached 0.9 (target 0.9) at trial 2."
    assert reason(StoppingRules(target=0.3), [0.5, 0.31], "min") is None
    assert reason(StoppingRules(target=0.3), [0.5, 0.25, 0.28], "min") == (
        "Stopped early: m reached 0.25 (target 0.3) at trial 2.")


def test_a_plateau_counts_trials_since_the_last_improvement_by_more_than_delta():
    rules = StoppingRules(patience=3, min_delta=0.05)
    assert reason(rules, [0.5, 0.6, 0.62, 0.64]) is None  # two trials since 0.6
    assert reason(rules, [0.5, 0.6, 0.62, 0.64, 0.65]) == (
        "Stopped early: no improvement over 0.6 by more than 0.05 in the last 3 trials (best m 0.65 at trial 5).")
    assert reason(rules, [0.5, 0.6, 0.62, 0.64, 0.7]) is None  # 0.7 beats 0.6 by more than 0.05


def test_with_no_delta_any_improvement_resets_the_patience():
    rules = StoppingRules(patience=2)
    assert reason(rules, [1.0, 0.9, 0.95, 0.89], "min") is None
    assert reason(rules, [1.0, 0.9, 0.95, 0.9], "min") == (
        "Stopped early: no improvement over 0.9 in the last 2 trials (best m 0.9 at trial 2).")


def test_scores_that_are_not_numbers_are_left_out():
    assert reason(StoppingRules(patience=1), [math.nan]) is None
    assert reason(StoppingRules(target=1.0), [math.inf, 0.5]) is None


@pytest.mark.parametrize(("values", "field", "message"), [
    ({"stop_target": math.nan}, "stop_target", "Must be a finite number"),
    ({"stop_target": "high"}, "stop_target", "Must be a finite number"),
    ({"stop_patience": 0}, "stop_patience", "Must be a whole number from 1 to 10 (max trials)"),
    ({"stop_patience": 11}, "stop_patience", "Must be a whole number from 1 to 10 (max trials)"),
    ({"stop_patience": 2.5}, "stop_patience", "Must be a whole number"),
    ({"stop_patience": 3, "stop_min_delta": -0.1}, "stop_min_delta", "Must be 0 or a positive number."),
    ({"stop_patience": 3, "stop_min_delta": math.inf}, "stop_min_delta", "Must be 0 or a positive number."),
    ({"stop_min_delta": 0.01}, "stop_min_delta", "Only applies with trials without improvement"),
    ({"stop_device_hours": 0}, "stop_device_hours", "Must be a positive number of device-hours"),
    ({"stop_device_hours": -2.5}, "stop_device_hours", "Must be a positive number of device-hours"),
    ({"stop_device_hours": math.inf}, "stop_device_hours", "Must be a positive number of device-hours"),
    ({"stop_device_hours": 1e300}, "stop_device_hours", "Must be a positive number of device-hours up to 1,000,000"),
])
def test_bad_settings_are_refused_with_a_message_naming_the_field(values, field, message):
    errors = stopping_errors(max_trials=10, **values)
    assert list(errors) == [field] and errors[field].startswith(message)


def test_good_settings_pass():
    assert stopping_errors(max_trials=10, stop_target=-3.5, stop_patience=10, stop_min_delta=0.0) == {}
    assert stopping_errors(max_trials=10, stop_target=None, stop_patience=None, stop_min_delta=0) == {}


def test_the_study_page_describes_the_rules_in_one_line():
    assert describe(StoppingRules(), metric="val_loss", direction="min") == "none: the study runs its whole budget"
    assert describe(StoppingRules(target=0.95, patience=5, min_delta=0.001), metric="val_accuracy",
                    direction="max") == ("stop once val_accuracy ≥ 0.95, or when the best has not improved by more "
                                         "than 0.001 in 5 trials")
    assert describe(StoppingRules(device_hours=2.5), metric="val_loss", direction="min") == (
        "stop once its trials have used 2.5 device-hours")


def test_a_device_hour_budget_is_spent_once_the_finished_trials_reach_it():
    rules = StoppingRules(device_hours=0.5)
    assert budget_reason(StoppingRules(), device_seconds=1e9, trials=3) is None
    assert budget_reason(rules, device_seconds=1799.0, trials=3) is None
    assert budget_reason(rules, device_seconds=1800.0, trials=1) == (
        "Stopped early: its budget of 0.5 device-hours is spent (0.5 device-hours over 1 trial).")


def test_after_an_extension_only_the_new_segments_trials_reach_the_target_or_wait_out_the_patience():
    def since(rules, scores, first, direction="max"):
        return stop_reason(rules, results=list(enumerate(scores, start=1)), direction=direction, metric="m",
                           since=first)

    assert since(StoppingRules(target=0.9), [0.95, 0.5], first=2) is None  # reached before the extension
    assert since(StoppingRules(target=0.9), [0.95, 0.5, 0.91], first=2) == (
        "Stopped early: m reached 0.91 (target 0.9) at trial 3.")
    plateau = StoppingRules(patience=2)
    assert since(plateau, [0.9, 0.5, 0.5, 0.4], first=4) is None  # waited 2 before, 1 since
    assert since(plateau, [0.9, 0.5, 0.5, 0.4, 0.6], first=4) == (
        "Stopped early: no improvement over 0.9 in the last 2 trials (best m 0.9 at trial 1).")
