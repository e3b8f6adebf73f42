"""Hyperparameter importance (experiments/presentation/importance.py): the hyperparameter the score depends
on ranks first, one that never varies gets 0, categories and conditional (absent) values are
handled, and too few trials say so instead of inventing a ranking."""

import random

import pytest

from experiments.presentation import importance


def _trials(n: int, score, seed: int = 3) -> list[dict]:
    rng = random.Random(seed)
    trials = []
    for _ in range(n):
        hp = {"units": rng.choice([8, 16, 32, 64]), "learning_rate": 10 ** rng.uniform(-4, -1),
              "activation": rng.choice(["relu", "tanh", "gelu"]), "dropout": rng.uniform(0, 0.5),
              "batch_norm": rng.random() < 0.5, "layers": 2, "tuner/epochs": 4}
        trials.append({"hyperparameters": hp, "score": score(hp)})
    return trials


def _shares(result: dict) -> dict[str, float]:
    return {row["name"]: row["importance"] for row in result["rows"]}


def test_the_only_hyperparameter_the_score_depends_on_ranks_first():
    result = importance.hyperparameter_importance(_trials(40, lambda hp: 0.5 + hp["dropout"]))
    shares = _shares(result)
    assert result["rows"][0]["name"] == "dropout"
    assert shares["dropout"] > 0.8
    assert result["message"] == "" and result["trials"] == 40
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)


def test_a_hyperparameter_that_never_varies_gets_exactly_zero_and_tuner_bookkeeping_is_left_out():
    shares = _shares(importance.hyperparameter_importance(_trials(30, lambda hp: hp["units"] / 64)))
    assert shares["layers"] == 0.0
    assert "tuner/epochs" not in shares
    assert max(shares, key=shares.get) == "units"


def test_a_categorical_hyperparameter_is_one_hot_encoded_and_summed_back():
    effect = {"relu": 0.9, "tanh": 0.5, "gelu": 0.1}
    result = importance.hyperparameter_importance(_trials(40, lambda hp: effect[hp["activation"]]))
    assert result["rows"][0]["name"] == "activation"
    assert _shares(result)["activation"] > 0.8
    assert [row["name"] for row in result["rows"]].count("activation") == 1


def test_a_boolean_hyperparameter_is_treated_as_a_category():
    result = importance.hyperparameter_importance(_trials(30, lambda hp: 0.8 if hp["batch_norm"] else 0.2))
    assert result["rows"][0]["name"] == "batch_norm"


def test_a_conditional_hyperparameter_absent_from_some_trials_is_handled():
    trials = _trials(30, lambda hp: 0.0)
    for i, trial in enumerate(trials):
        if i % 2:
            trial["hyperparameters"]["momentum"] = 0.5 + (i % 4) / 10
        trial["score"] = 0.9 if "momentum" in trial["hyperparameters"] else 0.3
    result = importance.hyperparameter_importance(trials)
    assert result["rows"][0]["name"] == "momentum"


def test_the_same_trials_always_give_the_same_shares():
    trials = _trials(25, lambda hp: hp["dropout"] + hp["units"] / 100)
    assert importance.hyperparameter_importance(trials) == importance.hyperparameter_importance(trials)


def test_fewer_than_five_scored_trials_are_not_enough():
    trials = _trials(4, lambda hp: hp["dropout"])
    trials.append({"hyperparameters": {"units": 8}, "score": float("nan")})  # not a score
    result = importance.hyperparameter_importance(trials)
    assert result["rows"] == []
    assert result["message"] == importance.NOT_ENOUGH and "Not enough trials" in result["message"]
    assert result["trials"] == 4


def test_scores_that_never_differ_give_every_hyperparameter_zero_with_the_reason():
    result = importance.hyperparameter_importance(_trials(10, lambda hp: 0.75))
    assert all(row["importance"] == 0.0 for row in result["rows"])
    assert result["message"] == importance.NO_SPREAD


def test_a_large_study_is_estimated_on_an_even_sample():
    result = importance.hyperparameter_importance(_trials(importance.MAX_TRIALS + 300, lambda hp: hp["dropout"]))
    assert result["trials"] == importance.MAX_TRIALS
    assert result["rows"][0]["name"] == "dropout"
