"""Axis ticks people can read (experiments/presentation/chart_ticks.py): steps of 1, 2 or 5 × 10^k, decades
on log axes, short labels; the parallel coordinates' default axes are the most important."""

import math

import pytest

from experiments.presentation import chart_ticks, study_charts


@pytest.mark.parametrize("low, high, labels", [
    (0.0, 0.5, ["0", "0.1", "0.2", "0.3", "0.4", "0.5"]),
    (32, 256, ["0", "50", "100", "150", "200", "250", "300"]),
    (-3.481198, -1.2, ["-3.5", "-3", "-2.5", "-2", "-1.5", "-1"]),
    (0.8734, 0.9412, ["0.86", "0.88", "0.9", "0.92", "0.94", "0.96"]),
])
def test_linear_axes_tick_on_nice_steps_with_short_labels(low, high, labels):
    ticks = chart_ticks.linear_ticks(low, high)
    assert ticks["ticktext"] == labels
    steps = {round(b - a, 12) for a, b in zip(ticks["tickvals"], ticks["tickvals"][1:], strict=False)}
    assert len(steps) == 1
    mantissa = steps.pop() / 10 ** math.floor(math.log10(ticks["tickvals"][1] - ticks["tickvals"][0]))
    assert round(mantissa, 9) in (1, 2, 5)
    assert ticks["range"][0] <= low and ticks["range"][1] >= high  # the axis ends on ticks around the data


@pytest.mark.parametrize("low, high, labels", [
    (1e-4, 1e-2, ["1e-4", "0.001", "0.01"]),
    (1e-3, 1e-1, ["0.001", "0.01", "0.1"]),
    (1e-3, 5e-3, ["0.001", "0.002", "0.005"]),
    (1000, 20000, ["1000", "1e4", "2e4"]),
    (3e-4, 0.03, ["2e-4", "0.001", "0.01", "0.05"]),
])
def test_log_axes_tick_on_decades_labelled_with_the_values(low, high, labels):
    ticks = chart_ticks.log_ticks(math.log10(low), math.log10(high))
    assert ticks["ticktext"] == labels
    assert ticks["tickvals"] == sorted(ticks["tickvals"])


@pytest.mark.parametrize("value, step, label", [
    (0.15, 0.05, "0.15"), (0.1, 0.05, "0.1"), (250.0, 50, "250"), (0.0001, None, "1e-4"), (0.00025, None, "2.5e-4"),
    (0.001, None, "0.001"), (-3.0, 1, "-3"), (200000.0, None, "2e5"), (12000.0, 1000, "1.2e4"), (0, 1, "0"),
])
def test_labels_are_short(value, step, label):
    assert chart_ticks.number_label(value, step) == label


def test_long_names_are_cut_in_the_middle_with_an_ellipsis():
    assert chart_ticks.short("learning_rate") == "learning_rate"
    assert chart_ticks.short("conv2d_num_filters_per_block") == "conv2d…r_block"
    assert len(chart_ticks.short("conv2d_num_filters_per_block")) == chart_ticks.LABEL_CHARS
    # Axes of one family differ at their end and stay apart.
    assert chart_ticks.short("dropout_rate_layer_1") != chart_ticks.short("dropout_rate_layer_2")


def test_parallel_coordinates_default_to_the_most_important_hyperparameters():
    names = [f"hp_{i:02d}" for i in range(12)]
    trials = [{"hyperparameters": {n: (t * (i + 1)) % 7 + 0.5 for i, n in enumerate(names)},
               "score": float(t % 5)} for t in range(40)]
    ranking = [{"name": n, "importance": 0.1} for n in reversed(names)]
    parallel = study_charts.parallel_coordinates(trials, names, ranking=ranking)
    assert parallel["order"] == list(reversed(names))
    assert parallel["default"] == list(reversed(names))[:study_charts.DEFAULT_PARALLEL_AXES] == \
        ["hp_11", "hp_10", "hp_09", "hp_08", "hp_07", "hp_06"]
    assert len(parallel["dimensions"]) == 12  # every one is there for the user to add
    assert all(len(t) <= 6 for d in parallel["dimensions"] for t in d["ticktext"])
    assert parallel["score"]["ticktext"] == ["0", "1", "2", "3", "4"]
    no_ranking = study_charts.parallel_coordinates(trials, names)
    assert no_ranking["default"] == names[:6]  # the search space's order until importance exists
