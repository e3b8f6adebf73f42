"""Several objectives and constraints (experiments/tuning/objectives.py): what the page's lines
and the API's lists become, what is refused and why, violations, and the Pareto front."""

import pytest

from experiments.tuning.objectives import (
    ObjectiveError,
    as_lines,
    is_feasible,
    objective_errors,
    pareto_front,
    parse_constraints,
    parse_objectives,
    violations,
)

ALLOWED = ["val_accuracy", "val_loss", "params", "latency_ms"]


def test_the_pages_lines_and_the_apis_lists_mean_the_same():
    lines = parse_objectives("params min\nlatency_ms min", allowed=ALLOWED)
    assert lines == parse_objectives([{"metric": "params", "direction": "min"},
                                      {"metric": "latency_ms", "direction": "min"}], allowed=ALLOWED)
    assert lines == parse_objectives('[{"metric": "params", "direction": "min"}, '
                                     '{"metric": "latency_ms", "direction": "min"}]', allowed=ALLOWED)
    constraints = parse_constraints("params <= 100000\nval_accuracy>=0.9", allowed=ALLOWED)
    assert constraints == [{"metric": "params", "op": "<=", "value": 100000.0},
                           {"metric": "val_accuracy", "op": ">=", "value": 0.9}]
    assert parse_constraints(as_lines(constraints), allowed=ALLOWED) == constraints
    assert parse_objectives(as_lines(lines), allowed=ALLOWED) == lines
    assert parse_objectives("", allowed=ALLOWED) == [] == parse_constraints(None, allowed=ALLOWED)


@pytest.mark.parametrize(("text", "message"), [
    ("params", "one per line, a metric and min or max"),
    ("params smallest", "say min or max for params"),
    ("test_accuracy max", "the test split is never used for selection"),
    ("val_mae min", "val_mae is not reported by this hypermodel on this dataset"),
    ("params min\nlatency_ms min\nval_loss min", "at most 2 besides the objective metric"),
    ("[{\"metric\": ", "not valid JSON"),
])
def test_it_refuses_bad_objectives_with_a_message(text, message):
    with pytest.raises(ObjectiveError, match=message):
        parse_objectives(text, allowed=ALLOWED)


@pytest.mark.parametrize(("text", "message"), [
    ("params < 10", "compare params with <= or >="),
    ("params <= lots", "the bound for params must be a finite number"),
    ("params <= nan", "the bound for params must be a finite number"),
    ("params <= inf", "the bound for params must be a finite number"),
    ("speed <= 3", "speed is not reported"),
    ("\n".join(["params <= 1"] * 6), "at most 5"),
])
def test_it_refuses_bad_constraints_with_a_message(text, message):
    with pytest.raises(ObjectiveError, match=message):
        parse_constraints(text, allowed=ALLOWED)


def test_a_team_hypermodel_may_report_any_metric():
    assert parse_objectives("my_metric max", allowed=None) == [{"metric": "my_metric", "direction": "max"}]


def test_several_objectives_refuse_tuners_and_pruners_that_rank_by_one_score():
    extra = [{"metric": "params", "direction": "min"}]
    assert objective_errors(tuner="optuna_nsga2", objective_metric="val_accuracy", extra_objectives=extra,
                            pruner="none") == {}
    errors = objective_errors(tuner="bayesian", objective_metric="val_accuracy", extra_objectives=extra,
                              pruner="median")
    assert "Bayesian optimisation and Hyperband rank trials by one score" in errors["tuner"]
    assert "compares trials by one objective" in errors["pruner"]
    assert "different metric" in objective_errors(tuner="random", objective_metric="params", extra_objectives=extra,
                                                  pruner=None)["extra_objectives"]
    assert objective_errors(tuner="bayesian", objective_metric="val_loss", extra_objectives=[], pruner="median") == {}


def test_a_broken_constraint_makes_a_trial_infeasible_and_a_missing_metric_breaks_it():
    constraints = [{"metric": "params", "op": "<=", "value": 1000.0},
                   {"metric": "val_accuracy", "op": ">=", "value": 0.5}]
    assert violations({"params": 800.0, "val_accuracy": 0.75}, constraints) == [-200.0, -0.25]
    assert is_feasible({"params": 800.0, "val_accuracy": 0.75}, constraints) is True
    assert is_feasible({"params": 1200.0, "val_accuracy": 0.75}, constraints) is False
    assert is_feasible({"val_accuracy": 0.75}, constraints) is False
    assert is_feasible({"params": 1.0}, []) is None


def test_the_front_keeps_exactly_the_points_no_other_point_beats_on_every_objective():
    # (accuracy max, params min)
    points = [[0.9, 5000], [0.8, 1000], [0.85, 6000], [0.7, 1000], [0.95, 9000], [0.9, 5000]]
    front = pareto_front(points, ["max", "min"])
    assert front == [0, 1, 4, 5]  # 2 is beaten by 0; 3 by 1; equal points do not beat each other
    assert pareto_front([[1.0, 2.0, 3.0], [1.0, 2.0, 2.0]], ["min", "min", "min"]) == [1]
    assert pareto_front([], ["min", "min"]) == []
