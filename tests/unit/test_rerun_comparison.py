"""How close a re-run came: each metric's absolute and relative difference, and which keys of
the environment differed, with changed inputs (dataset, code, seed) called out."""

import pytest

from experiments.tuning.reproducibility import difference, environment_differences, rerun_comparison
from tests.fixtures.environments import changed

ENVIRONMENT = {
    "seed": 8,
    "host": "cpu-1",
    "devices": {"kind": "cpu", "names": ["/device:CPU:0"], "replicas": 1},
    "versions": {"python": "3.11.9", "tensorflow": "2.21.0", "keras": "3.15.1", "numpy": "2.4.6"},
    "dataset": {"id": 1, "name": "digits", "sha256": "a" * 64, "upload_sha256": None,
                "split": {"seed": 0, "val_fraction": 0.15, "test_fraction": 0.15,
                          "sizes": {"train": 1257, "validation": 270, "test": 270}}},
    "hypermodel": {"name": "tiny", "team": True, "target": "pkg.tiny:build", "module": "pkg.tiny", "version": None,
                   "source_sha256": "c" * 64},
    "training": {"objective": "val_accuracy", "direction": "max", "epochs": 3, "batch_size": 64, "patience": 2,
                 "executions": 1, "initial_epoch": 0},
}


def _with(**changes) -> dict:
    return changed(ENVIRONMENT, **changes)


def _original(**overrides) -> dict:
    return {"score": 0.8, "best_epoch": 3, "metrics": {"val_accuracy": 0.8, "val_loss": 0.5, "loss": 0.4},
            "environment": ENVIRONMENT, **overrides}


def test_a_difference_is_signed_absolute_and_relative_to_the_original():
    row = difference(0.8, 0.78)
    assert row["difference"] == pytest.approx(-0.02)
    assert row["absolute"] == pytest.approx(0.02)
    assert row["relative"] == pytest.approx(0.025) and row["relative_percent"] == pytest.approx(2.5)
    assert row["identical"] is False
    assert difference(0.5, 0.5) == {"original": 0.5, "rerun": 0.5, "difference": 0.0, "absolute": 0.0,
                                    "relative": 0.0, "relative_percent": 0.0, "identical": True}


def test_a_difference_from_zero_or_to_a_missing_value_has_no_relative_figure():
    assert difference(0.0, 0.1)["relative"] is None and difference(0.0, 0.1)["absolute"] == pytest.approx(0.1)
    assert difference(0.0, 0.0)["relative"] == 0.0
    missing = difference(0.3, None)
    assert missing["difference"] is None and missing["relative"] is None and missing["identical"] is False
    assert difference(float("nan"), 0.3)["absolute"] is None


def test_identical_records_have_no_differences():
    assert environment_differences(ENVIRONMENT, _with()) == []


def test_each_differing_key_is_listed_dotted_with_both_values():
    rerun = _with(host="gpu-7", versions__tensorflow="2.22.0", devices__kind="gpu")
    assert environment_differences(ENVIRONMENT, rerun) == [
        {"key": "devices.kind", "original": "cpu", "rerun": "gpu", "input": False},
        {"key": "host", "original": "cpu-1", "rerun": "gpu-7", "input": False},
        {"key": "versions.tensorflow", "original": "2.21.0", "rerun": "2.22.0", "input": False},
    ]


def test_a_key_only_one_record_has_is_a_difference():
    rerun = _with()
    rerun["versions"]["tuneboard"] = "0.2.0"
    assert environment_differences(ENVIRONMENT, rerun) == [
        {"key": "versions.tuneboard", "original": None, "rerun": "0.2.0", "input": False}]


def test_the_comparison_gives_the_objective_the_best_epoch_and_every_metric():
    rerun = {"score": 0.79, "best_epoch": 3, "metrics": {"val_accuracy": 0.79, "val_loss": 0.5, "loss": 0.41},
             "environment": _with()}
    result = rerun_comparison(objective="val_accuracy", original=_original(), rerun=rerun)
    assert result["objective"]["name"] == "val_accuracy"
    assert result["objective"]["absolute"] == pytest.approx(0.01)
    assert result["objective"]["relative_percent"] == pytest.approx(1.25)
    assert result["best_epoch"] == {"original": 3, "rerun": 3, "difference": 0, "absolute": 0, "relative": 0.0,
                                    "relative_percent": 0.0, "identical": True}
    assert isinstance(result["best_epoch"]["difference"], int)
    assert [row["name"] for row in result["metrics"]] == ["loss", "val_accuracy", "val_loss"]
    assert [row["identical"] for row in result["metrics"]] == [False, False, True]
    assert result["same_environment"] and result["same_inputs"] and result["notes"] == []


def test_a_changed_dataset_or_hypermodel_code_is_said_in_words():
    rerun = {"score": 0.7, "best_epoch": 2, "metrics": {}, "environment": _with(
        dataset__sha256="b" * 64, hypermodel__source_sha256="d" * 64, host="elsewhere")}
    result = rerun_comparison(objective="val_accuracy", original=_original(), rerun=rerun)
    assert result["notes"] == ["The dataset's stored splits changed since the original trial ran.",
                               "The hypermodel's code changed since the original trial ran."]
    assert not result["same_environment"] and not result["same_inputs"]
    keys = {d["key"]: d["input"] for d in result["environment_differences"]}
    assert keys == {"dataset.sha256": True, "hypermodel.source_sha256": True, "host": False}


def test_a_trial_that_recorded_no_environment_is_compared_on_results_only():
    rerun = {"score": 0.8, "best_epoch": 3, "metrics": {"val_accuracy": 0.8}, "environment": _with()}
    result = rerun_comparison(objective="val_accuracy", original=_original(environment={}), rerun=rerun)
    assert result["objective"]["identical"]
    assert not result["environment_recorded"] and result["environment_differences"] == []
    assert not result["same_environment"]
    assert result["notes"] == ["The original trial recorded no environment (it ran before Tuneboard kept one), so "
                               "only its results can be compared."]
