"""Pruning for studies with several objectives (MO-ASHA: successive halving whose rungs rank trials by
non-dominated sorting): pure functions of the stored vectors, so every worker decides alike."""

import math
from dataclasses import dataclass

from experiments.tuning import pruners
from experiments.tuning.objectives import MEASURED_AT_THE_END
from experiments.tuning.pruning_options import PruningSettings

# What the pruner can watch at an epoch's end besides the epoch's own metrics: the model's size is known before
# its first epoch (objectives.MEASURED_AT_THE_END are not watched).
KNOWN_BEFORE_TRAINING = ("params",)


@dataclass(frozen=True)
class Point:
    """One trial at one epoch: its objective values (best so far for the first, the epoch's for the rest),
    and how far it breaks the watched constraints (0 when it meets them)."""

    values: tuple[float, ...]
    violation: float = 0.0

    def record(self) -> dict:
        return {"values": list(self.values), "violation": self.violation}

    @classmethod
    def from_record(cls, record) -> "Point | None":
        if not isinstance(record, dict) or not record.get("values"):
            return None
        return cls(tuple(float(v) for v in record["values"]), float(record.get("violation") or 0.0))


def watched(metrics: list[str]) -> list[str]:
    """The objectives and constraint metrics the pruner can compare at an epoch."""
    return [metric for metric in metrics if metric not in MEASURED_AT_THE_END]


def point(*, best: float | None, metrics: dict, known: dict, objectives: list[str], constraints: list[dict]
          ) -> Point | None:
    """This epoch's point: `best` is the first objective's best so far; the others are read from the epoch's
    metrics or what was known before training. None when a watched objective has no finite value."""
    values = [best]
    seen = {**metrics, **known}
    for metric in watched(objectives[1:]):
        values.append(pruners.objective_value(seen, metric))
    if any(value is None for value in values):
        return None
    violation = 0.0
    for row in constraints:
        if row["metric"] in MEASURED_AT_THE_END:
            continue
        value = pruners.objective_value(seen, row["metric"])
        if value is None:
            continue  # an epoch metric this epoch did not report: judged at the end, not here
        # Relative to the bound, so a bound on params (1e5) does not swamp one on val_loss (0.3).
        broken = max(value - row["value"] if row["op"] == "<=" else row["value"] - value, 0.0)
        violation += broken / max(abs(row["value"]), 1e-9)
    return Point(tuple(values), violation)


def _signed(point: Point, directions: list[str]) -> tuple[float, ...]:
    return tuple(v if d == "min" else -v for v, d in zip(point.values, directions, strict=False))


def dominates(a: Point, b: Point, directions: list[str]) -> bool:
    """Deb's constrained domination: a feasible point beats an infeasible one, the smaller violation beats the larger,
    and between feasible points the usual Pareto rule (no worse on any objective, better on one)."""
    if a.violation != b.violation:
        return a.violation < b.violation
    x, y = _signed(a, directions), _signed(b, directions)
    return all(p <= q for p, q in zip(x, y, strict=True)) and any(p < q for p, q in zip(x, y, strict=True))


def fronts(points: list[Point], directions: list[str]) -> list[list[int]]:
    """Non-dominated sorting: the indices of the first front, then of the front after it, and so on."""
    beaten_by = [sum(dominates(b, a, directions) for j, b in enumerate(points) if j != i)
                 for i, a in enumerate(points)]
    beats = [[j for j, b in enumerate(points) if j != i and dominates(a, b, directions)] for i, a in enumerate(points)]
    found, current = [], [i for i, count in enumerate(beaten_by) if count == 0]
    while current:
        found.append(current)
        following = []
        for i in current:
            for j in beats[i]:
                beaten_by[j] -= 1
                if beaten_by[j] == 0:
                    following.append(j)
        current = sorted(following)
    return found


def crowding(points: list[Point], front: list[int], directions: list[str]) -> dict[int, float]:
    """NSGA-II's crowding distance within one front: how much room each point has around it (ends are infinite)."""
    distance = dict.fromkeys(front, 0.0)
    if len(front) < 3:
        return dict.fromkeys(front, math.inf)
    for axis in range(len(directions)):
        ordered = sorted(front, key=lambda i: (_signed(points[i], directions)[axis], i))
        low, high = points[ordered[0]].values[axis], points[ordered[-1]].values[axis]
        distance[ordered[0]] = distance[ordered[-1]] = math.inf
        if high == low:
            continue
        for before, middle, after in zip(ordered, ordered[1:], ordered[2:], strict=False):
            distance[middle] += (points[after].values[axis] - points[before].values[axis]) / (high - low)
    return distance


def decide(*, settings: PruningSettings, directions: list[str], execution: int, epoch: int, point: Point | None,
           others: list[Point], completed: int, last: bool = False) -> pruners.Decision:
    """At a rung (epoch m·r^k), a trial goes on when no trial at that rung dominates it, or when it is within the best
    1/r of them by (front, crowding); otherwise it is pruned. The order of `others` does not matter."""
    common = {"pruner": settings.pruner, "execution": execution, "epoch": epoch,
              "value": None if point is None else point.values[0], "compared": len(others)}
    skipped = pruners.judged(settings, epoch, last=last)
    if skipped is None and completed < settings.startup_trials:
        skipped = pruners.STARTUP
    if skipped is None and point is None:
        skipped = pruners.NO_VALUE
    if skipped is None and len(others) < settings.min_trials:
        skipped = pruners.TOO_FEW
    if skipped is not None:
        return pruners.Decision(False, skipped, **common)
    # A canonical order, so the same set of trials gives the same verdict whatever order the rows came in.
    competing = sorted(others, key=lambda p: (p.violation, _signed(p, directions)))
    competing.append(point)
    me = len(competing) - 1
    layers = fronts(competing, directions)
    order = []
    for layer in layers:
        distance = crowding(competing, layer, directions)
        order.extend(sorted(layer, key=lambda i: (-distance[i], competing[i].violation,
                                                  _signed(competing[i], directions), i != me)))
    kept = max(len(competing) // settings.reduction_factor, 1)
    rank = next(n for n, layer in enumerate(layers) if me in layer)
    prune = rank > 0 and order.index(me) >= kept
    beaten = sum(dominates(other, point, directions) for other in competing[:-1])
    return pruners.Decision(prune, pruners.PRUNED if prune else pruners.KEPT, threshold=float(beaten),
                            rung=pruners.rung_of(epoch, settings), **common)

