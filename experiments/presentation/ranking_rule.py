"""The one rule that ranks models wherever they are ranked (the team's test metric in its direction, ties broken
alike), pure so it is tested without a database."""

import math
from datetime import datetime

CLASSIFICATION = "classification"

# Substrings of metrics that are better when higher; everything else (loss, mae, mse, ...) is minimised.
MAXIMISED = ("acc", "auc", "precision", "recall", "f1", "r2")

TIE_BREAKS = "ties: the lower test loss, then the better validation figure, then the newest"


def metric_direction(metric: str) -> str:
    """"max" for accuracy-like metrics, "min" for losses and errors."""
    return "max" if any(part in metric.lower() for part in MAXIMISED) else "min"


def default_ranking_metric(task: str) -> str:
    """What a team that chose nothing ranks by: accuracy for classification, the loss (MSE) for regression."""
    return "accuracy" if task == CLASSIFICATION else "loss"


def _get(item, name: str):
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _number(value) -> float | None:
    """A finite float, or None for a missing, non-numeric or non-finite value (they rank last)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def metric_value(item, metric: str, split: str = "test") -> float | None:
    return _number((_get(item, f"{split}_metrics") or {}).get(metric))


# Figures equal to this many decimals tie: a model's float32 accuracy (0.96296298) and an
# ensemble's float64 one (0.96296296) of the same 26/27 are the same figure.
TIE_DECIMALS = 6


def _tied(value: float | None) -> float:
    return round(value or 0.0, TIE_DECIMALS)


def tie_breaks(metric: str) -> str:
    """The tie rule as the page states it (the loss is not repeated when it is the key)."""
    return ("ties: the better validation figure, then the newest" if metric == "loss" else TIE_BREAKS)


def _timestamp(value) -> float:
    return value.timestamp() if isinstance(value, datetime) else 0.0


def rank_key(item, metric: str, direction: str) -> tuple:
    """Sort key: the test metric in its direction (missing last), then the lower test loss,
    then the better validation figure of the metric, then the newest, then the highest id."""
    sign = -1.0 if direction == "max" else 1.0
    test, loss, val = metric_value(item, metric), metric_value(item, "loss"), metric_value(item, metric, "val")
    return (test is None, sign * _tied(test), loss is None, _tied(loss), val is None, sign * _tied(val),
            -_timestamp(_get(item, "created")), -(_get(item, "id") or 0))


def rank_models(models, metric: str, direction: str | None = None) -> list:
    """The models best first by `metric` (direction inferred when not given); models that do
    not record it come last, in the same tie order."""
    direction = direction or metric_direction(metric)
    return sorted(models, key=lambda item: rank_key(item, metric, direction))


def recorded_test_metrics(models) -> list[str]:
    """The numeric test metrics the models record, by name."""
    names = set()
    for item in models:
        names.update(k for k, v in (_get(item, "test_metrics") or {}).items() if _number(v) is not None)
    return sorted(names)


def effective_ranking_metric(chosen: str, task: str, recorded: list[str]) -> tuple[str, str | None]:
    """The metric models of one dataset are ranked by, and why it is not the chosen one when it
    is not: a team's choice that no model of this dataset records (accuracy on a regression
    dataset) falls back to the task's default rather than ranking every model last."""
    default = default_ranking_metric(task)
    if not chosen:
        return default, None
    if chosen in recorded or not recorded:
        return chosen, None
    return default, f"No model of this dataset records test {chosen}, so it is ranked by test {default}."
