"""The one ranking rule (experiments/presentation/ranking_rule.py): the chosen test metric in its direction,
ties broken by test loss, then the validation figure, then the newest; models without the
metric last; the task's default when a team chose nothing."""

from datetime import datetime, timedelta

import pytest

from experiments.presentation.ranking_rule import (
    default_ranking_metric,
    effective_ranking_metric,
    metric_direction,
    rank_models,
    recorded_test_metrics,
    tie_breaks,
)

NOW = datetime(2026, 1, 1, 12, 0)


def _model(id_, test=None, val=None, minutes_ago=0):
    return {"id": id_, "test_metrics": test or {}, "val_metrics": val or {},
            "created": NOW - timedelta(minutes=minutes_ago)}


def _ids(models):
    return [m["id"] for m in models]


@pytest.mark.parametrize("metric, direction", [
    ("accuracy", "max"), ("val_accuracy", "max"), ("auc", "max"), ("precision", "max"), ("recall", "max"),
    ("loss", "min"), ("mae", "min"), ("mse", "min"), ("val_loss", "min"),
])
def test_the_direction_is_inferred_from_the_metric(metric, direction):
    assert metric_direction(metric) == direction


def test_accuracy_ranks_highest_first_and_loss_lowest_first():
    models = [_model(1, {"accuracy": 0.8, "loss": 0.3}), _model(2, {"accuracy": 0.95, "loss": 0.5}),
              _model(3, {"accuracy": 0.9, "loss": 0.1})]
    assert _ids(rank_models(models, "accuracy")) == [2, 3, 1]
    assert _ids(rank_models(models, "loss")) == [3, 1, 2]
    assert _ids(rank_models(models, "accuracy", "min")) == [1, 3, 2]  # an explicit direction wins


def test_ties_go_to_the_lower_test_loss_then_the_better_validation_figure_then_the_newest():
    tied = [
        _model(1, {"accuracy": 1.0, "loss": 0.20}, {"accuracy": 0.9}, minutes_ago=5),
        _model(2, {"accuracy": 1.0, "loss": 0.05}, {"accuracy": 0.8}, minutes_ago=9),
        _model(3, {"accuracy": 1.0, "loss": 0.20}, {"accuracy": 0.95}, minutes_ago=7),
        _model(4, {"accuracy": 1.0, "loss": 0.20}, {"accuracy": 0.9}, minutes_ago=1),
    ]
    # 2 has the lowest loss; 3 the best validation among the rest; 4 is newer than 1.
    assert _ids(rank_models(tied, "accuracy")) == [2, 3, 4, 1]
    # The order does not depend on the order the models came in.
    assert _ids(rank_models(list(reversed(tied)), "accuracy")) == [2, 3, 4, 1]


def test_equal_in_everything_the_higher_id_wins():
    same = [_model(5, {"mae": 0.1}), _model(9, {"mae": 0.1})]
    assert _ids(rank_models(same, "mae")) == [9, 5]


def test_models_without_the_metric_or_with_a_non_finite_one_go_last_without_crashing():
    models = [_model(1, {"loss": 0.2}), _model(2, {"accuracy": 0.7}), _model(3, {"accuracy": float("nan")}),
              _model(4, {"accuracy": "high"}), _model(5, {"accuracy": 0.9}), {"id": 6, "test_metrics": None}]
    ranked = _ids(rank_models(models, "accuracy"))
    assert ranked[:2] == [5, 2]
    assert set(ranked[2:]) == {1, 3, 4, 6}
    assert ranked[2] == 1  # among the unranked, a model that records the lower loss first


def test_it_ranks_model_instances_as_well_as_rows():
    class Model:
        def __init__(self, id_, accuracy):
            self.id, self.test_metrics, self.val_metrics, self.created = id_, {"accuracy": accuracy}, {}, NOW

    assert [m.id for m in rank_models([Model(1, 0.5), Model(2, 0.6)], "accuracy")] == [2, 1]


def test_a_team_without_a_choice_ranks_classification_by_accuracy_and_regression_by_loss():
    assert default_ranking_metric("classification") == "accuracy"
    assert default_ranking_metric("regression") == "loss"
    assert effective_ranking_metric("", "classification", ["accuracy", "loss"]) == ("accuracy", None)
    assert effective_ranking_metric("", "regression", ["loss", "mae"]) == ("loss", None)


def test_a_chosen_metric_the_dataset_does_not_record_falls_back_to_the_default_and_says_so():
    assert effective_ranking_metric("mae", "regression", ["loss", "mae"]) == ("mae", None)
    metric, note = effective_ranking_metric("accuracy", "regression", ["loss", "mae"])
    assert metric == "loss" and note == "No model of this dataset records test accuracy, so it is ranked by test loss."
    assert effective_ranking_metric("auc", "classification", []) == ("auc", None)  # nothing to rank anyway


def test_the_recorded_metrics_are_the_numeric_test_metrics_of_any_model():
    models = [_model(1, {"accuracy": 0.9, "loss": 0.2}), _model(2, {"auc": 0.8, "note": "x"}), {"id": 3}]
    assert recorded_test_metrics(models) == ["accuracy", "auc", "loss"]


def test_a_float32_and_a_float64_figure_of_the_same_score_tie_and_the_loss_decides():
    # 26/27 as Keras's float32 accuracy and as an ensemble's float64 one.
    model = {"id": 1, "test_metrics": {"accuracy": 0.9629629850, "loss": 0.0858239010}}
    ensemble = {"id": 2, "test_metrics": {"accuracy": 0.9629629630, "loss": 0.0858238767}}
    assert [m["id"] for m in rank_models([model, ensemble], "accuracy")] == [2, 1]


def test_the_tie_rule_never_repeats_the_key():
    assert "loss" not in tie_breaks("loss") and "lower test loss" in tie_breaks("accuracy")
