"""workers.tuners.hyperparameters against the real KerasTuner: conversion, conditions, oracles."""

import json

import keras_tuner
import pytest
from keras_tuner.engine import hyperparameters as hp_types

from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE
from experiments.tuning.search_space import SearchSpaceError, validate_search_space
from experiments.tuning.space_values import grid_size
from workers.tuners.hyperparameters import active_values, to_hyperparameters

# KerasTuner's oracle calls threading.currentThread(), deprecated since Python 3.10.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")


def row(name: str, type_: str, **spec) -> dict:
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


OPTIMIZER_SPACE = [
    row("units", "int", min=32, max=256, step=32, sampling="linear"),
    row("lr", "float", min=1e-4, max=1e-2, step=None, sampling="log"),
    row("optimizer", "choice", values=["adam", "sgd"], ordered=False),
    {**row("momentum", "float", min=0.0, max=0.9, step=None, sampling="linear"),
     "parent": "optimizer", "parent_values": ["sgd"]},
    {**row("nesterov", "boolean"), "parent": "momentum_on", "parent_values": [True]},
    {**row("momentum_on", "boolean"), "parent": "optimizer", "parent_values": ["sgd"]},
]


def by_name(hp: keras_tuner.HyperParameters) -> dict:
    return {param.name: param for param in hp.space}


def run_oracle(oracle: keras_tuner.Oracle, tmp_path, limit: int) -> list[dict]:
    """Drive an oracle like a tuner would; returns each trial's values."""
    oracle._set_project_dir(str(tmp_path), "study")
    seen = []
    for _ in range(limit):
        trial = oracle.create_trial("worker-1")
        if trial.status != keras_tuner.engine.trial.TrialStatus.RUNNING:
            break
        seen.append(active_values(trial.hyperparameters))
        oracle.update_trial(trial.trial_id, {"score": 1.0})
        trial.status = keras_tuner.engine.trial.TrialStatus.COMPLETED
        oracle.end_trial(trial)
    return seen


# --- Conversion ---------------------------------------------------------------------------


def test_each_type_converts() -> None:
    hp = to_hyperparameters([
        row("units", "int", min=32, max=256, step=32, sampling="linear"),
        row("layers", "int", min=1, max=4, step=None, sampling="linear"),
        row("dropout", "float", min=0.0, max=0.5, step=0.1, sampling="linear"),
        row("act", "choice", values=["relu", "tanh"], ordered=False),
        row("width", "choice", values=[0.5, 1.0], ordered=True),
        row("bn", "boolean"),
        row("opt", "fixed", value="adam"),
    ])
    params = by_name(hp)
    assert isinstance(params["units"], hp_types.Int)
    assert (params["units"].min_value, params["units"].max_value, params["units"].step) == (
        32, 256, 32)
    assert params["layers"].step == 1  # KerasTuner's default for a linear Int
    assert isinstance(params["dropout"], hp_types.Float) and params["dropout"].step == 0.1
    assert isinstance(params["act"], hp_types.Choice)
    assert (params["act"].values, params["act"].ordered) == (["relu", "tanh"], False)
    assert (params["width"].values, params["width"].ordered) == ([0.5, 1.0], True)
    assert isinstance(params["bn"], hp_types.Boolean)
    assert isinstance(params["opt"], hp_types.Fixed) and params["opt"].value == "adam"
    # Every hyperparameter starts at its default.
    assert hp.values == {"units": 32, "layers": 1, "dropout": 0.0, "act": "relu",
                         "width": 0.5, "bn": False, "opt": "adam"}


@pytest.mark.parametrize("sampling", ["log", "reverse_log"])
def test_float_log_sampling_converts_and_samples_in_range(sampling: str) -> None:
    hp = to_hyperparameters([row("lr", "float", min=1e-4, max=1e-2, step=None,
                                 sampling=sampling)])
    param = by_name(hp)["lr"]
    assert param.sampling == sampling and param.step is None
    samples = [param.random_sample(seed) for seed in range(200)]
    assert all(1e-4 <= s <= 1e-2 for s in samples)
    if sampling == "log":  # about half of log-uniform samples fall below the geometric mean
        assert 60 < sum(s < 1e-3 for s in samples) < 140


def test_int_log_sampling_with_step_multiplies() -> None:
    param = by_name(to_hyperparameters([row("batch", "int", min=2, max=32, step=2,
                                            sampling="log")]))["batch"]
    assert list(param.values) == [2, 4, 8, 16, 32]


def test_bool_choice_keeps_real_bools() -> None:
    # KerasTuner's Choice would turn [True, False] into [1, 0].
    hp = to_hyperparameters([row("flag", "choice", values=[True, False], ordered=False),
                             row("only", "choice", values=[False], ordered=False)])
    params = by_name(hp)
    assert isinstance(params["flag"], hp_types.Boolean) and params["flag"].default is True
    assert isinstance(params["only"], hp_types.Fixed)
    assert hp.values == {"flag": True, "only": False}


def test_dense_defaults_convert() -> None:
    hp = to_hyperparameters(DENSE_DEFAULT_SPACE)
    assert [param.name for param in hp.space] == [r["name"] for r in DENSE_DEFAULT_SPACE]


def test_invalid_rows_are_refused_on_the_worker_too() -> None:
    with pytest.raises(SearchSpaceError):
        to_hyperparameters([row("units", "int", min=5, max=1, step=None, sampling="linear")])


# --- Conditions ---------------------------------------------------------------------------


def test_parents_are_declared_first_and_scopes_nest() -> None:
    hp = to_hyperparameters(OPTIMIZER_SPACE)
    names = [param.name for param in hp.space]
    assert names.index("optimizer") < names.index("momentum_on") < names.index("nesterov")
    conditions = by_name(hp)["nesterov"].conditions
    assert [(c.name, c.values) for c in conditions] == [("optimizer", ["sgd"]),
                                                        ("momentum_on", [True])]


def test_inactive_conditional_hyperparameters_have_no_value() -> None:
    hp = to_hyperparameters(OPTIMIZER_SPACE)
    assert hp.values["optimizer"] == "adam"
    assert not hp.is_active("momentum")
    assert "momentum" not in hp.values and "momentum" not in hp
    with pytest.raises(ValueError, match="inactive"):
        hp.get("momentum")
    with pytest.raises(KeyError):
        hp.get("no_such_thing")
    assert set(active_values(hp)) == {"units", "lr", "optimizer"}


def test_active_conditional_hyperparameters_get_values() -> None:
    hp = to_hyperparameters(OPTIMIZER_SPACE)
    hp.values["optimizer"] = "sgd"
    hp.ensure_active_values()  # what KerasTuner does when values change
    assert hp.is_active("momentum") and 0.0 <= hp.get("momentum") <= 0.9
    hp.values["momentum_on"] = True
    hp.ensure_active_values()
    assert set(active_values(hp)) == {"units", "lr", "optimizer", "momentum", "momentum_on",
                                      "nesterov"}


def test_hypermodel_lookups_return_the_registered_value() -> None:
    hp = to_hyperparameters(OPTIMIZER_SPACE)
    hp.values.update({"units": 96, "optimizer": "sgd", "momentum": 0.5})
    # Same name, same scopes: the stored value wins; the new range is ignored.
    assert hp.Int("units", min_value=1, max_value=2) == 96
    with hp.conditional_scope("optimizer", ["sgd"]):
        assert hp.Float("momentum", 0.0, 0.9) == 0.5
    assert len(hp.space) == len(OPTIMIZER_SPACE)
    # Same name in different scopes is a *new* hyperparameter: why hypermodels use hp.get().
    hp.Float("momentum", 0.0, 0.9)
    assert len(hp.space) == len(OPTIMIZER_SPACE) + 1


# --- Oracles ------------------------------------------------------------------------------


def test_random_search_oracle_samples_inside_the_rows(tmp_path) -> None:
    rows = validate_search_space(OPTIMIZER_SPACE)
    oracle = keras_tuner.oracles.RandomSearchOracle(
        objective=keras_tuner.Objective("score", "max"), max_trials=40,
        hyperparameters=to_hyperparameters(rows), seed=3)
    trials = run_oracle(oracle, tmp_path, limit=40)
    assert len(trials) == 40
    for values in trials:
        json.dumps(values)  # JSON-safe scalars
        assert values["units"] in range(32, 257, 32) and type(values["units"]) is int
        assert 1e-4 <= values["lr"] <= 1e-2
        assert values["optimizer"] in ("adam", "sgd")
        sgd = values["optimizer"] == "sgd"
        assert ("momentum" in values) == sgd and ("momentum_on" in values) == sgd
        if sgd:
            assert 0.0 <= values["momentum"] <= 0.9
        assert ("nesterov" in values) == (values.get("momentum_on") is True)
    assert {v["optimizer"] for v in trials} == {"adam", "sgd"}
    assert any("nesterov" in v for v in trials)


def test_grid_search_oracle_tries_exactly_grid_size_combinations(tmp_path) -> None:
    rows = validate_search_space([
        row("opt", "choice", values=["adam", "sgd", "rmsprop"], ordered=False),
        {**row("momentum", "choice", values=[0.0, 0.9], ordered=True),
         "parent": "opt", "parent_values": ["sgd"]},
        {**row("nesterov", "boolean"), "parent": "momentum", "parent_values": [0.9]},
        row("batch", "int", min=16, max=64, step=2, sampling="log"),
        row("dropout", "float", min=0.0, max=0.5, step=0.25, sampling="linear"),
    ])
    oracle = keras_tuner.oracles.GridSearchOracle(
        objective=keras_tuner.Objective("score", "max"), max_trials=500,
        hyperparameters=to_hyperparameters(rows))
    trials = run_oracle(oracle, tmp_path, limit=500)
    assert len(trials) == grid_size(rows) == (1 + 3 + 1) * 3 * 3
    assert len({json.dumps(v, sort_keys=True) for v in trials}) == len(trials)  # no repeats
    # GridSearch yields floats (16.0, 32.0) for a log Int with step; active_values casts back.
    assert {type(v["batch"]) for v in trials} == {int}


@pytest.mark.parametrize(
    "spec",
    [
        {"min": 0.0, "max": 0.5, "step": 0.1, "sampling": "linear"},
        {"min": 0.0, "max": 0.9, "step": 0.1, "sampling": "linear"},
        {"min": 1e-5, "max": 1e-1, "step": 10.0, "sampling": "log"},
        {"min": 1e-3, "max": 1.0, "step": 10.0, "sampling": "reverse_log"},
    ],
)
def test_grid_size_matches_keras_tuner_float_values(spec: dict) -> None:
    rows = validate_search_space([row("x", "float", **spec)])
    assert grid_size(rows) == len(list(by_name(to_hyperparameters(rows))["x"].values))


@pytest.mark.parametrize(("low", "high"), [(1, 1000), (1, 3), (8, 512), (3, 40)])
def test_grid_size_matches_keras_tuner_int_log_samples(low: int, high: int) -> None:
    rows = validate_search_space([row("x", "int", min=low, max=high, step=None,
                                      sampling="log")])
    assert grid_size(rows) == len(by_name(to_hyperparameters(rows))["x"].values)
