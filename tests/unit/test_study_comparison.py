"""Building the study comparison from rows (experiments/presentation/comparison.py): which selections
are refused and why, each study's history by trial number with its best so far in its own
direction, the best trials side by side, and studies with different objectives kept apart."""

from types import SimpleNamespace

import pytest

from experiments.presentation.comparison import (
    MAX_ID,
    ComparisonError,
    best_trial_entry,
    check_selection,
    comparison,
    objective_groups,
    parse_study_ids,
    side_by_side,
    study_history,
)


def test_ids_are_read_once_each_in_the_order_given_repeated_or_comma_separated():
    assert parse_study_ids(["7", "3", "7", "12,5", " ", ""]) == [7, 3, 12, 5]
    assert parse_study_ids([]) == []


@pytest.mark.parametrize("raw", ["abc", "-1", "0", "1.5", "²", "١", "3²", "0x10", str(MAX_ID + 1), "9" * 5000, "1 2"])
def test_anything_but_a_positive_ascii_whole_number_in_range_is_refused_with_a_message(raw):
    with pytest.raises(ComparisonError, match="Studies are picked by their ids, whole numbers"):
        parse_study_ids(["1", raw])


def test_more_than_four_studies_are_refused_before_anything_is_read():
    with pytest.raises(ComparisonError, match="Pick between 2 and 4 studies of one dataset to compare; you picked 5"):
        parse_study_ids(["1,2,3", "4", "5"])


def _study(pk: int, dataset_id: int, dataset_name: str):
    return SimpleNamespace(pk=pk, name=f"s{pk}", dataset_id=dataset_id, dataset=SimpleNamespace(name=dataset_name))


def test_a_selection_must_be_two_to_four_studies_of_one_dataset():
    check_selection([_study(1, 1, "iris"), _study(2, 1, "iris")])
    with pytest.raises(ComparisonError, match="you picked 1"):
        check_selection([_study(1, 1, "iris")])
    with pytest.raises(ComparisonError) as refused:
        check_selection([_study(1, 1, "iris"), _study(2, 2, "wine"), _study(3, 1, "iris")])
    assert str(refused.value) == "Only studies of one dataset can be compared: 's1' and 's3' use iris; 's2' uses wine."


def _rows(scores, statuses=None):
    statuses = statuses or ["completed"] * len(scores)
    return [{"pk": 100 + i, "number": i + 1, "status": status, "score": score}
            for i, (score, status) in enumerate(zip(scores, statuses, strict=True))]


def test_the_history_is_by_trial_number_with_the_best_so_far_in_the_studys_direction():
    rows = _rows([0.5, 0.7, None, 0.6, 0.9, float("nan")],
                 ["completed", "completed", "failed", "completed", "completed", "completed"])
    up = study_history(rows, "max")
    assert up["history"]["number"] == [1, 2, 4, 5]  # the failed trial 3 and the NaN trial 6 drawn nowhere
    assert up["history"]["score"] == [0.5, 0.7, 0.6, 0.9]
    assert up["history"]["best"] == [0.5, 0.7, 0.7, 0.9]
    assert up["history"]["trial"] == [100, 101, 103, 104]
    assert (up["best"]["number"], up["trials_completed"], up["trials_total"]) == (5, 4, 6)

    down = study_history(rows, "min")
    assert down["history"]["best"] == [0.5, 0.5, 0.5, 0.5]
    assert down["best"]["number"] == 1


def test_of_two_equal_best_scores_the_earlier_trial_is_the_best():
    assert study_history(_rows([0.3, 0.1, 0.1]), "min")["best"]["number"] == 2


def test_a_study_without_completed_trials_has_an_empty_history_and_no_best():
    history = study_history(_rows([None], ["running"]), "max")
    assert history["history"]["number"] == [] and history["best"] is None and history["trials_completed"] == 0


def _meta(pk, metric="val_accuracy", direction="max"):
    return {"id": pk, "name": f"s{pk}", "tuner": "random", "tuner_label": "Random search", "hypermodel": "dense",
            "status": "completed", "objective_metric": metric, "objective_direction": direction}


def test_studies_with_the_same_objective_share_an_axis_and_others_get_their_own():
    groups = objective_groups([_meta(1), _meta(2, "val_loss", "min"), _meta(3)])
    assert groups == [{"metric": "val_accuracy", "direction": "max", "studies": [1, 3]},
                      {"metric": "val_loss", "direction": "min", "studies": [2]}]


def _best(pk, score, hp, metrics=None):
    return {"pk": pk, "number": pk % 100, "score": score, "metrics": metrics or {"val_accuracy": score},
            "hyperparameters": hp}


def test_best_trials_side_by_side_take_the_union_of_names_and_leave_gaps_empty():
    entries = [{"best_trial": best_trial_entry(_best(101, 0.9, {"units": 8, "tuner/epochs": 2}))},
               {"best_trial": best_trial_entry(_best(202, 0.8, {"units": 16, "dropout": 0.25}))},
               {"best_trial": None}]
    assert side_by_side(entries, "hyperparameters") == [
        {"name": "dropout", "values": [None, 0.25, None]}, {"name": "units", "values": [8, 16, None]}]
    assert entries[0]["best_trial"]["label"] == "Trial 1"


def test_a_metric_that_is_not_a_finite_number_becomes_null():
    entry = best_trial_entry(_best(101, 0.9, {}, {"val_accuracy": 0.9, "val_loss": float("inf")}))
    assert entry["metrics"] == {"val_accuracy": 0.9, "val_loss": None}


def _compare(metas, rows_by_study, best_rows):
    histories = {m["id"]: study_history(rows_by_study[m["id"]], m["objective_direction"]) for m in metas}
    return comparison(studies=metas, histories=histories, best_rows=best_rows,
                      importance_trials={m["id"]: [] for m in metas})


def test_the_leader_is_named_only_when_the_studies_share_one_objective():
    rows = {1: _rows([0.5, 0.8]), 2: [{**r, "pk": r["pk"] + 100} for r in _rows([0.9, 0.6])]}
    best = {101: _best(101, 0.8, {"units": 8}), 200: _best(200, 0.9, {"units": 32})}
    same = _compare([_meta(1), _meta(2)], rows, best)
    assert same["leader"] == 2 and not same["objectives_differ"]
    assert [s["best_trial"]["id"] for s in same["studies"]] == [101, 200]
    assert same["hyperparameters"] == [{"name": "units", "values": [8, 32]}]
    assert same["studies"][0]["importance"]["message"].startswith("Not enough trials")

    differ = _compare([_meta(1), _meta(2, "val_loss", "min")], rows, {**best, 201: _best(201, 0.6, {})})
    assert differ["objectives_differ"] and differ["leader"] is None
    assert differ["studies"][1]["best_trial"]["id"] == 201  # 0.6 is the lower val_loss
