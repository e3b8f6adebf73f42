"""Several objectives and constraints for a study, in pure Python so the web validates and draws Pareto fronts
with the rules the tuners are told."""

import json
import math
import re

from experiments.errors import TuneboardError

# Cost objectives measured once training ends: the Pareto pruner cannot watch them at an epoch's end (params is known
# before the first epoch; the epoch metrics at each).
MEASURED_AT_THE_END = ("latency_ms", "device_seconds", "seconds_per_epoch")

MAX_EXTRA = 2
MAX_CONSTRAINTS = 5
COST_METRICS = {
    "params": "the model's parameter count",
    "latency_ms": "median milliseconds of a one-row prediction, measured on the worker",
    "device_seconds": "the trial's wall time on its worker times the devices it held (what it cost)",
    "seconds_per_epoch": "the trial's wall time divided by the epochs it trained",
}
OPERATORS = ("<=", ">=")
# Several objectives need a tuner that searches for a front, or one that does not model a score.
MULTI_OBJECTIVE_TUNERS = ("random", "grid", "optuna_tpe", "optuna_gp", "optuna_nsga2")


class ObjectiveError(TuneboardError, ValueError):
    pass


def cost_help() -> str:
    return "Every trial also reports " + "; ".join(f"{name}: {text}" for name, text in COST_METRICS.items()) + "."


def _rows(value, what: str) -> list:
    """A JSON list as the API sends it, or the page's lines ("params min", "params <= 1000")."""
    if value in (None, ""):
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            rows = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ObjectiveError(f"{what}: not valid JSON ({exc.msg}).") from None
        return _rows(rows, what)
    if isinstance(value, str):
        return [line.split() for line in value.splitlines() if line.strip()]
    raise ObjectiveError(f"{what}: give a list.")


def parse_objectives(value, *, allowed: list[str] | None) -> list[dict]:
    """[{"metric", "direction"}] from a list of dicts or lines "metric min|max"."""
    found = []
    for row in _rows(value, "More objectives"):
        if isinstance(row, dict):
            metric, direction = row.get("metric"), row.get("direction")
        elif isinstance(row, list) and len(row) == 2:
            metric, direction = row
        else:
            raise ObjectiveError("More objectives: one per line, a metric and min or max, e.g. \"params min\".")
        _check_metric(metric, allowed, "More objectives")
        if direction not in ("min", "max"):
            raise ObjectiveError(f"More objectives: say min or max for {metric}, not {direction!r}.")
        found.append({"metric": metric, "direction": direction})
    if len(found) > MAX_EXTRA:
        raise ObjectiveError(f"More objectives: at most {MAX_EXTRA} besides the objective metric (3 in all).")
    return found


def parse_constraints(value, *, allowed: list[str] | None) -> list[dict]:
    """[{"metric", "op", "value"}] from a list of dicts or lines "metric <= number"."""
    found = []
    for row in _rows(value, "Constraints"):
        if isinstance(row, dict):
            metric, op, bound = row.get("metric"), row.get("op"), row.get("value")
        elif isinstance(row, list) and len(row) == 3:
            metric, op, bound = row
        elif isinstance(row, list) and len(row) == 1 and (parts := re.fullmatch(r"(\S+?)(<=|>=)(\S+)", row[0])):
            metric, op, bound = parts.groups()
        else:
            raise ObjectiveError("Constraints: one per line, a metric, <= or >=, and a number, e.g. "
                                 "\"params <= 100000\".")
        _check_metric(metric, allowed, "Constraints")
        if op not in OPERATORS:
            raise ObjectiveError(f"Constraints: compare {metric} with <= or >=, not {op!r}.")
        try:
            number = float(bound)
        except (TypeError, ValueError):
            number = math.nan
        if isinstance(bound, bool) or not math.isfinite(number):
            raise ObjectiveError(f"Constraints: the bound for {metric} must be a finite number, not {bound!r}.")
        found.append({"metric": metric, "op": op, "value": number})
    if len(found) > MAX_CONSTRAINTS:
        raise ObjectiveError(f"Constraints: at most {MAX_CONSTRAINTS}.")
    return found


def as_lines(rows: list[dict]) -> str:
    """The page's text for stored objectives or constraints (what parse_* reads back)."""
    return "\n".join(f"{r['metric']} {r['direction']}" if "direction" in r
                     else f"{r['metric']} {r['op']} {r['value']:g}" for r in rows)


def _check_metric(metric, allowed: list[str] | None, what: str) -> None:
    if not isinstance(metric, str) or not metric.strip():
        raise ObjectiveError(f"{what}: name a metric.")
    if metric.startswith("test"):
        raise ObjectiveError(f"{what}: {metric}: the test split is never used for selection.")
    if allowed is not None and metric not in allowed:
        raise ObjectiveError(f"{what}: {metric} is not reported by this hypermodel on this dataset; choose from "
                             f"{', '.join(allowed)}.")


def objective_errors(*, tuner: str | None, objective_metric: str | None, extra_objectives: list,
                     pruner: str | None) -> dict[str, str]:
    """The rules several objectives add, as {field: message}."""
    if not extra_objectives:
        if pruner == "pareto":
            return {"pruner": "Pareto successive halving compares trials on several objectives: add one under More "
                              "objectives, or choose successive halving for one objective."}
        return {}
    metrics = [objective_metric] + [row["metric"] for row in extra_objectives]
    if len(set(metrics)) < len(metrics):
        return {"extra_objectives": "Each objective must be a different metric."}
    errors = {}
    if tuner and tuner not in MULTI_OBJECTIVE_TUNERS:
        errors["tuner"] = ("Several objectives need a tuner that searches for a Pareto front (Optuna TPE, Optuna "
                           "Gaussian process or Optuna NSGA-II) or random or grid search; Bayesian optimisation and "
                           "Hyperband rank trials by one score.")
    if pruner and pruner not in ("none", "pareto"):
        errors["pruner"] = ("This pruner compares trials by one objective at each epoch, so it cannot judge a "
                            "multi-objective study: a trial behind on accuracy may be the smallest model. Choose "
                            "Pareto successive halving, no pruner, or one objective.")
    elif pruner == "pareto" and all(row["metric"] in MEASURED_AT_THE_END for row in extra_objectives):
        names = [row["metric"] for row in extra_objectives]
        errors["pruner"] = (f"Pareto successive halving can watch only what a trial reports at an epoch's end; "
                            f"{', '.join(names)} {'are' if len(names) > 1 else 'is'} measured when training ends, "
                            "so it would judge on one objective: choose successive halving, or add an objective it "
                            "can watch (an epoch metric or params).")
    return errors


# --- results ---------------------------------------------------------------------------------


def violations(metrics: dict, constraints: list[dict]) -> list[float]:
    """Each constraint's violation: > 0 when broken (by that much), <= 0 when met. A metric the
    trial did not report breaks its constraint."""
    found = []
    for row in constraints:
        value = metrics.get(row["metric"])
        if value is None or not math.isfinite(value):
            found.append(math.inf)
        else:
            found.append(value - row["value"] if row["op"] == "<=" else row["value"] - value)
    return found


def is_feasible(metrics: dict, constraints: list[dict]) -> bool | None:
    return None if not constraints else all(v <= 0 for v in violations(metrics, constraints))


def objective_values(metrics: dict, score: float | None, study) -> list[float | None]:
    """The trial's value of each of the study's objectives, primary first."""
    return [score] + [metrics.get(row["metric"]) for row in study.extra_objectives]


def directions(study) -> list[str]:
    return [study.objective_direction] + [row["direction"] for row in study.extra_objectives]


def pareto_front(points: list[list[float]], directions: list[str]) -> list[int]:
    """Indices of the points no other point dominates (at least as good on every objective and
    better on one). O(n²), fine for the trials of a study."""
    signed = [[v if d == "min" else -v for v, d in zip(point, directions, strict=True)] for point in points]
    front = []
    for i, a in enumerate(signed):
        dominated = any(all(x <= y for x, y in zip(b, a, strict=True)) and any(x < y for x, y in zip(b, a, strict=True))
                        for j, b in enumerate(signed) if j != i)
        if not dominated:
            front.append(i)
    return front


def needs_latency(study) -> bool:
    return any(row["metric"] == "latency_ms" for row in [*study.extra_objectives, *study.constraints])
