"""Pruning for studies with several objectives (MO-ASHA: successive halving whose rungs rank trials by
non-dominated sorting): pure functions of the stored vectors, so every worker decides alike."""

import bisect
import math
from dataclasses import dataclass

import numpy as np

from experiments.tuning import pruners
from experiments.tuning.objectives import MEASURED_AT_THE_END
from experiments.tuning.pruning_options import PruningSettings

# What the pruner can watch at an epoch's end besides the epoch's own metrics: the model's size is known before
# its first epoch (objectives.MEASURED_AT_THE_END are not watched).
KNOWN_BEFORE_TRAINING = ("params",)
BLOCK = 512  # rows of the domination matrix at a time: 512 × 10,000 trials × 3 objectives stays in a few tens of MB


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


def _beats(values: np.ndarray, violations: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Deb's constrained domination of `rows` over every point, as a (rows × points) matrix: the smaller violation wins
    (a feasible point beats an infeasible one); at equal violations the Pareto rule on the signed values (no worse on
    any objective, better on one)."""
    a, b = values[rows][:, None, :], values[None, :, :]
    va, vb = violations[rows][:, None], violations[None, :]
    return (va < vb) | ((va == vb) & (a <= b).all(axis=2) & (a < b).any(axis=2))


def _beaten_by(values: np.ndarray, violations: np.ndarray) -> np.ndarray:
    """How many points dominate each point, counted in blocks of rows (a study's first rung holds every trial)."""
    counts = np.zeros(len(values), dtype=np.int64)
    for start in range(0, len(values), BLOCK):
        counts += _beats(values, violations, np.arange(start, min(start + BLOCK, len(values)))).sum(axis=0)
    return counts


def _crowding(values: np.ndarray, front: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance within one front: how much room each point has around it (the ends infinite)."""
    if len(front) < 3:
        return np.full(len(front), math.inf)
    distance = np.zeros(len(front))
    for axis in range(values.shape[1]):
        column = values[front, axis]
        order = np.lexsort((front, column))
        span = column[order[-1]] - column[order[0]]
        distance[order[0]] = distance[order[-1]] = math.inf
        if span > 0:
            distance[order[1:-1]] += (column[order[2:]] - column[order[:-2]]) / span
    return distance


def _ranks_2d(values: np.ndarray, violations: np.ndarray) -> np.ndarray:
    """Each point's front for two objectives in O(n log n) (Jensen's sweep): within one violation level (feasible
    first: a smaller violation dominates), points by the first objective then the second each join the first front
    whose last point does not dominate them; those last points' second values stay sorted, so a bisection finds it."""
    ranks = np.empty(len(values), dtype=np.int64)
    offset = 0
    for level in np.unique(violations):
        group = np.flatnonzero(violations == level)
        last_y: list[float] = []
        last: list[tuple[float, float]] = []
        for i in group[np.lexsort((values[group, 1], values[group, 0]))]:
            x, y = float(values[i, 0]), float(values[i, 1])
            low, high = bisect.bisect_left(last_y, y), bisect.bisect_right(last_y, y)
            # An equal point does not dominate its twin: it joins the twin's front.
            front = next((k for k in range(low, high) if last[k] == (x, y)), high)
            if front == len(last_y):
                last_y.append(y)
                last.append((x, y))
            else:
                last_y[front], last[front] = y, (x, y)
            ranks[i] = offset + front
        offset += len(last_y)
    return ranks


def _peeled_rank(values: np.ndarray, violations: np.ndarray, me: int, kept: int) -> tuple[int, np.ndarray | None,
                                                                                          int]:
    """Three objectives or more: non-dominated sorting by peeling fronts, only until `me`'s front is found or the
    places that go on are taken. (its front, that front's points or None when it need not be known, points before)"""
    beaten_by, left = _beaten_by(values, violations), np.ones(len(values), dtype=bool)
    placed, rank = 0, 0
    while True:
        front = np.flatnonzero(left & (beaten_by == 0))
        if me in front:
            return rank, front, placed
        placed, rank = placed + len(front), rank + 1
        if placed >= kept:
            return rank, None, placed
        left[front] = False
        beaten_by -= _beats(values, violations, front).sum(axis=0)


def rank_and_place(points: list[Point], directions: list[str], me: int, kept: int) -> tuple[int, int, int]:
    """(the front `me` is on, 0 the first; its place in the order by front, then crowding distance, then violation
    and values — exact only where it decides against `kept`; how many points dominate it)."""
    values = np.array([_signed(p, directions) for p in points], dtype=float)
    violations = np.array([p.violation for p in points], dtype=float)
    beaten = int(_dominating(values, violations, me).sum())
    if beaten == 0:
        return 0, 0, 0  # on the first front: it goes on whatever its place
    if beaten >= kept:
        return 1, beaten, beaten  # those that dominate it are all on earlier fronts: at least `kept` places before it
    # The points it dominates come after it and dominate none of the others (domination is transitive): leaving
    # them out changes no front up to its own.
    mine = np.flatnonzero(~_dominated_by(values, violations, me))
    values, violations, me = values[mine], violations[mine], int(np.flatnonzero(mine == me)[0])
    if values.shape[1] == 2:
        ranks = _ranks_2d(values, violations)
        rank, front, placed = int(ranks[me]), np.flatnonzero(ranks == ranks[me]), int((ranks < ranks[me]).sum())
    else:
        rank, front, placed = _peeled_rank(values, violations, me, kept)
    if front is None or placed >= kept or placed + len(front) <= kept:
        return rank, placed, beaten  # its place within its front does not change the verdict
    distance = _crowding(values, front)
    # Ties (equal crowding) by violation, then the values, then the trial itself last: a canonical order.
    keys = [(-distance[i], violations[j], tuple(values[j]), j == me) for i, j in enumerate(front)]
    return rank, placed + sorted(keys).index(keys[int(np.flatnonzero(front == me)[0])]), beaten


def _dominating(values: np.ndarray, violations: np.ndarray, me: int) -> np.ndarray:
    """Which points dominate `me` (_beats' column for it, in O(n))."""
    a, v = values, violations
    return (v < v[me]) | ((v == v[me]) & (a <= a[me]).all(axis=1) & (a < a[me]).any(axis=1))


def _dominated_by(values: np.ndarray, violations: np.ndarray, me: int) -> np.ndarray:
    """Which points `me` dominates (_beats' row for it, in O(n))."""
    a, v = values, violations
    return (v[me] < v) | ((v == v[me]) & (a[me] <= a).all(axis=1) & (a[me] < a).any(axis=1))


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
    competing = [*sorted(others, key=lambda p: (p.violation, _signed(p, directions))), point]
    me = len(competing) - 1
    kept = max(len(competing) // settings.reduction_factor, 1)
    rank, place, beaten = rank_and_place(competing, directions, me, kept)
    prune = rank > 0 and place >= kept
    return pruners.Decision(prune, pruners.PRUNED if prune else pruners.KEPT, threshold=float(beaten),
                            rung=pruners.rung_of(epoch, settings), **common)
