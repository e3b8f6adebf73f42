"""The figures a quantized variant is shown with: metrics from outputs (workers/export/variants.py), alike for
a Keras model and a TFLite file, and the warning past the threshold (presentation/variants.py)."""

import numpy as np
import pytest

from experiments.presentation.variants import accuracy_drop_warning
from workers.export.variants import _finite, prediction_metrics


def test_a_binary_model_with_one_sigmoid_output_is_scored_as_two_classes():
    outputs = np.array([[0.9], [0.2], [0.6], [0.4]])
    metrics = prediction_metrics(outputs, np.array([1, 0, 0, 0]), task="classification", n_classes=2)
    assert metrics["accuracy"] == 0.75
    assert metrics["log_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.8, 0.4, 0.6])))


def test_an_exact_zero_probability_gives_a_finite_log_loss_and_overflowed_figures_are_none():
    metrics = prediction_metrics(np.array([[1.0, 0.0]]), np.array([1]), task="classification", n_classes=2)
    assert np.isfinite(metrics["log_loss"]) and metrics["accuracy"] == 0.0
    regression = prediction_metrics(np.array([[1.0, 2.0], [3.0, 5.0]]), np.array([[1.0, 1.0], [3.0, 3.0]]),
                                    task="regression", n_classes=0)
    assert regression == {"mse": pytest.approx(5 / 4), "mae": pytest.approx(3 / 4)}
    assert _finite({"mse": float("inf"), "mae": float("nan"), "ok": 1.0}) == {"mse": None, "mae": None, "ok": 1.0}


def test_a_large_accuracy_drop_carries_a_plain_warning(settings):
    settings.QUANTIZATION_WARN_ACCURACY_DROP = 0.01
    figures = {"float": {"metrics": {"accuracy": 0.95}}, "variant": {"metrics": {"accuracy": 0.90}}}
    assert accuracy_drop_warning(figures).startswith("Test accuracy drops by 5.0 points (more than 1 point)")
    figures["variant"]["metrics"]["accuracy"] = 0.945
    assert accuracy_drop_warning(figures) == ""
    regression = {"float": {"metrics": {"mae": 1.0}}, "variant": {"metrics": {"mae": 1.2}}}
    assert "mean absolute error rises by 20.0%" in accuracy_drop_warning(regression)
    overflowed = {"float": {"metrics": {"mae": 1.0}}, "variant": {"metrics": {"mae": None}}}
    assert accuracy_drop_warning(overflowed).startswith("Its outputs overflowed")
