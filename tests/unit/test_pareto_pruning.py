"""The Pareto (MO-ASHA) pruner's rule, on hand-made points: what it keeps, what it prunes, and that the order the
finished trials' rows arrive in does not change a verdict."""

import itertools
import random

import numpy as np
import pytest

from experiments.tuning import pareto_pruning
from experiments.tuning.objectives import objective_errors
from experiments.tuning.pareto_pruning import Point, decide
from experiments.tuning.pruning_options import PruningSettings

SETTINGS = PruningSettings(pruner="pareto", startup_trials=0, min_trials=1, min_epochs=1, reduction_factor=3)
# Accuracy (max) and parameters (min).
DIRECTIONS = ["max", "min"]


def _decide(point, others, epoch=3, **kwargs):
    return decide(settings=SETTINGS, directions=DIRECTIONS, execution=0, epoch=epoch, point=point, others=others,
                  completed=len(others), **kwargs)


def test_a_trial_no_other_dominates_goes_on_however_many_beat_it_on_one_objective():
    others = [Point((0.95, 5000.0)), Point((0.93, 4000.0)), Point((0.90, 3000.0)), Point((0.85, 2500.0))]
    smallest = Point((0.5, 100.0))  # the worst accuracy, but the smallest model: on the front
    decision = _decide(smallest, others)
    assert not decision.prune and decision.reason == "kept" and decision.threshold == 0


def test_a_dominated_trial_outside_the_best_third_is_pruned_and_says_by_how_many():
    others = [Point((0.95, 1000.0)), Point((0.93, 1500.0)), Point((0.90, 2000.0)), Point((0.85, 2500.0)),
              Point((0.80, 900.0))]
    dominated = Point((0.70, 3000.0))  # every other trial is more accurate and smaller
    decision = _decide(dominated, others)
    assert decision.prune and decision.reason == "pruned" and decision.threshold == 5 and decision.rung == 1
    assert decision.record()["pruner"] == "pareto"


def test_the_verdict_is_the_same_whatever_order_the_rows_come_in():
    others = [Point((0.9, 1000.0)), Point((0.8, 800.0)), Point((0.7, 700.0)), Point((0.6, 3000.0)),
              Point((0.85, 2000.0)), Point((0.65, 650.0))]
    me = Point((0.75, 1900.0))
    verdicts = {(_decide(me, list(order)).prune, _decide(me, list(order)).threshold)
                for order in itertools.permutations(others)}
    assert len(verdicts) == 1


def test_it_judges_only_at_rungs_after_startup_and_never_after_the_last_epoch():
    others = [Point((0.95, 10.0))] * 3
    worst = Point((0.1, 1e6))
    assert _decide(worst, others, epoch=2).reason == "not_a_rung"  # rungs at 1, 3, 9, ...
    assert _decide(worst, others, epoch=9, last=True).reason == "last_epoch"
    waiting = decide(settings=PruningSettings(pruner="pareto", startup_trials=5), directions=DIRECTIONS, execution=0,
                     epoch=3, point=worst, others=others, completed=3)
    assert waiting.reason == "startup" and not waiting.prune
    assert _decide(None, others).reason == "no_value"


def test_a_trial_breaking_a_watched_constraint_loses_to_those_that_meet_it():
    feasible = [Point((0.6, 5000.0)), Point((0.55, 6000.0)), Point((0.5, 7000.0))]
    breaking = Point((0.99, 10.0), violation=2.0)  # best on both objectives, but over the bound
    assert _decide(breaking, feasible).prune


def test_the_point_watches_epoch_metrics_and_params_but_not_what_is_measured_after_training():
    found = pareto_pruning.point(
        best=0.8, metrics={"val_loss": 0.4, "val_accuracy": 0.8}, known={"params": 1200.0},
        objectives=["val_accuracy", "params", "latency_ms"],
        constraints=[{"metric": "params", "op": "<=", "value": 1000.0},
                     {"metric": "latency_ms", "op": "<=", "value": 1.0}])
    assert found == Point((0.8, 1200.0), violation=pytest.approx(0.2))  # relative to the bound
    assert pareto_pruning.point(best=0.8, metrics={}, known={}, objectives=["val_accuracy", "val_loss"],
                                constraints=[]) is None


def test_the_pareto_pruner_needs_several_objectives_and_one_it_can_watch():
    assert "add one under More objectives" in objective_errors(
        tuner="random", objective_metric="val_accuracy", extra_objectives=[], pruner="pareto")["pruner"]
    assert "measured when training ends" in objective_errors(
        tuner="random", objective_metric="val_accuracy", pruner="pareto",
        extra_objectives=[{"metric": "device_seconds", "direction": "min"}])["pruner"]
    assert objective_errors(tuner="optuna_tpe", objective_metric="val_accuracy", pruner="pareto",
                            extra_objectives=[{"metric": "params", "direction": "min"}]) == {}


def _fronts_by_brute_force(points, directions):
    def dominates(a, b):
        if a.violation != b.violation:
            return a.violation < b.violation
        x, y = pareto_pruning._signed(a, directions), pareto_pruning._signed(b, directions)
        return all(p <= q for p, q in zip(x, y, strict=True)) and any(p < q for p, q in zip(x, y, strict=True))

    left, ranks, rank = set(range(len(points))), {}, 0
    while left:
        front = {i for i in left if not any(dominates(points[j], points[i]) for j in left if j != i)}
        ranks.update(dict.fromkeys(front, rank))
        left, rank = left - front, rank + 1
    return [ranks[i] for i in range(len(points))]


def test_the_fast_sorting_finds_the_fronts_brute_force_finds_with_ties_duplicates_and_violations():
    rng = random.Random(1)
    for _ in range(200):
        dimensions = rng.choice([2, 3])
        points = [Point(tuple(float(rng.randint(0, 5)) for _ in range(dimensions)),
                        violation=rng.choice([0.0, 0.0, 0.0, 0.5, 1.0])) for _ in range(rng.randint(2, 30))]
        directions = [rng.choice(["min", "max"]) for _ in range(dimensions)]
        expected, me = _fronts_by_brute_force(points, directions), len(points) - 1
        if dimensions == 2:
            values = np.array([pareto_pruning._signed(p, directions) for p in points])
            violations = np.array([p.violation for p in points])
            assert list(pareto_pruning._ranks_2d(values, violations)) == expected
        for kept in (1, len(points) // 3 or 1, len(points) // 2 or 1):
            rank, place, _ = pareto_pruning.rank_and_place(points, directions, me, kept)
            assert (rank == 0) == (expected[me] == 0)
            assert place >= kept or rank == expected[me]  # a kept trial's front is exact
