"""experiments.tuning.search_space: validation messages, normalisation, choice parsing, grid size."""

import subprocess
import sys
from pathlib import Path

import pytest

from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE
from experiments.tuning.search_space import SearchSpaceError, parents_first, parse_choice_values, validate_search_space
from experiments.tuning.space_values import grid_size


def row(name: str = "units", type_: str = "int", **spec) -> dict:
    defaults = {
        "int": {"min": 32, "max": 256, "step": 32, "sampling": "linear"},
        "float": {"min": 0.0, "max": 0.5, "step": None, "sampling": "linear"},
        "choice": {"values": ["relu", "tanh"], "ordered": False},
        "boolean": {},
        "fixed": {"value": "adam"},
    }.get(type_, {})
    return {"name": name, "type": type_, **defaults, "parent": None, "parent_values": [],
            **spec}


def errors(rows: object) -> SearchSpaceError:
    with pytest.raises(SearchSpaceError) as caught:
        validate_search_space(rows)
    return caught.value


def only_error(rows: object, index: int = 0) -> str:
    """The single message on row `index`, asserting no other row complains."""
    error = errors(rows)
    assert list(error.row_errors) == [index], error.row_errors
    assert error.general == []
    [message] = error.row_errors[index]
    return message


# --- Whole-space problems -----------------------------------------------------------------


@pytest.mark.parametrize("rows", [None, {"name": "units"}, "units", 3])
def test_not_a_list(rows: object) -> None:
    error = errors(rows)
    assert error.row_errors == {}
    assert error.general == ["The search space must be a list of hyperparameters."]


def test_empty_list() -> None:
    error = errors([])
    assert error.row_errors == {} and error.general == ["Add at least one hyperparameter."]


def test_more_than_100_rows() -> None:
    error = errors([row(f"hp_{i}") for i in range(101)])
    assert error.row_errors == {}
    assert error.general == ["A search space can have at most 100 hyperparameters, not 101."]


def test_exactly_100_rows_is_fine() -> None:
    assert len(validate_search_space([row(f"hp_{i}") for i in range(100)])) == 100


def test_row_not_an_object() -> None:
    message = only_error([row("a"), "units"], index=1)
    assert message == "Each hyperparameter must be an object with a name and a type."


def test_error_lists_every_row_and_formats_messages() -> None:
    error = errors([row("a", min=300), row("b"), row("", "float")])
    assert set(error.row_errors) == {0, 2}
    assert error.messages()[0].startswith("Hyperparameter 1: Min (300) is greater")
    assert isinstance(error, ValueError)


# --- Names and types ----------------------------------------------------------------------


@pytest.mark.parametrize("name", [None, "", "   "])
def test_missing_name(name: object) -> None:
    assert only_error([row(name)]) == "Give this hyperparameter a name."


def test_missing_name_key() -> None:
    raw = row()
    del raw["name"]
    assert only_error([raw]) == "Give this hyperparameter a name."


@pytest.mark.parametrize("name", ["learning rate", "2nd_layer", "units-1", "ünits", 5])
def test_invalid_name(name: object) -> None:
    message = only_error([row(name)])
    assert message.startswith("The name ")
    assert "start with a letter or underscore" in message


def test_name_too_long() -> None:
    assert only_error([row("x" * 65)]) == "The name is 65 characters long; the limit is 64."
    assert validate_search_space([row("x" * 64)])[0]["name"] == "x" * 64


def test_duplicate_names_flag_the_later_row() -> None:
    message = only_error([row("units"), row("dropout", "float"), row("units")], index=2)
    assert message == "Another hyperparameter is already named units."


def test_unknown_type() -> None:
    message = only_error([row(type_="integer")])
    assert message == "Type 'integer' is unknown; use Int, Float, Choice, Boolean or Fixed."


def test_missing_type() -> None:
    assert only_error([{"name": "units"}]) == "Choose a type."


# --- Int and Float ------------------------------------------------------------------------


def test_min_greater_than_max_names_both_values() -> None:
    assert only_error([row(min=256, max=32)]) == "Min (256) is greater than max (32)."


def test_min_equal_max_suggests_fixed() -> None:
    message = only_error([row("dropout", "float", min=0.2, max=0.2)])
    assert message == "Min and max are both 0.2; use a Fixed hyperparameter for one value."


@pytest.mark.parametrize("step", [0, -32])
def test_step_not_positive(step: int) -> None:
    assert only_error([row(step=step)]) == f"Step must be greater than 0 (it is {step})."


def test_step_larger_than_range() -> None:
    message = only_error([row(min=32, max=64, step=64)])
    assert message == "Step 64 is larger than the range 32 to 64, so only 32 would ever be tried."


def test_step_equal_to_range_is_fine() -> None:
    assert validate_search_space([row(min=32, max=64, step=32)])[0]["step"] == 32


@pytest.mark.parametrize(
    ("field", "value", "label"),
    [("min", 1.5, "Min"), ("max", "64.5", "Max"), ("step", 0.5, "Step")],
)
def test_int_needs_whole_numbers(field: str, value: object, label: str) -> None:
    message = only_error([row(**{field: value})])
    assert message == f"{label} must be a whole number for an Int, not {float(value)}."


@pytest.mark.parametrize("value", ["abc", [1], {"v": 1}, True, "nan", float("inf")])
def test_min_not_a_number(value: object) -> None:
    message = only_error([row("dropout", "float", min=value)])
    assert message.startswith("Min must be a")


def test_missing_min_and_max() -> None:
    error = errors([row(min=None, max="")])
    assert error.row_errors == {0: ["Min is required for an Int.", "Max is required for an Int."]}


@pytest.mark.parametrize(("type_", "sampling"), [("int", "log"), ("float", "log"),
                                                 ("float", "reverse_log")])
@pytest.mark.parametrize("low", [0, -1])
def test_log_sampling_needs_positive_min(type_: str, sampling: str, low: int) -> None:
    message = only_error([row("x", type_, min=low, max=10, step=None, sampling=sampling)])
    shown = low if type_ == "int" else float(low)
    assert message == f"{sampling} sampling needs a min greater than 0 (min is {shown})."


@pytest.mark.parametrize("step", [1, 0.5])
def test_log_step_must_be_a_multiplier_above_one(step: float) -> None:
    # KerasTuner's Numerical._check_sampling_arg raises for step <= 1 with log sampling.
    message = only_error([row("lr", "float", min=1e-4, max=1e-2, step=step, sampling="log")])
    assert message.startswith(f"With log sampling the step multiplies each value, so it must be "
                              f"greater than 1 (it is {float(step)})")


def test_log_step_larger_than_range() -> None:
    message = only_error([row(min=2, max=8, step=16, sampling="log")])
    assert message == "Step 16 multiplies 2 past the max 8, so only 2 would ever be tried."


def test_int_has_no_reverse_log() -> None:
    message = only_error([row(step=None, sampling="reverse_log")])
    assert message == "Sampling 'reverse_log' is not available for an Int; use linear or log."


def test_unknown_sampling() -> None:
    message = only_error([row("lr", "float", sampling="exp")])
    assert message == (
        "Sampling 'exp' is not available for a Float; use linear, log or reverse_log.")


# --- Choice, Fixed ------------------------------------------------------------------------


@pytest.mark.parametrize("values", [[], "", " , "])
def test_empty_choice(values: object) -> None:
    message = only_error([row("act", "choice", values=values)])
    assert message == "Give at least one value to choose from."


def test_choice_values_not_a_list() -> None:
    message = only_error([row("act", "choice", values=None)])
    assert message == "Values must be a list, like relu, tanh."


def test_duplicate_choice_values() -> None:
    message = only_error([row("act", "choice", values=["relu", "tanh", "relu"])])
    assert message == "Each value may appear only once; repeated: 'relu'."


def test_duplicate_choice_values_after_float_promotion() -> None:
    message = only_error([row("lr", "choice", values=[1, 1.0, 0.5])])
    assert message == "Each value may appear only once; repeated: 1.0."


@pytest.mark.parametrize("values", [["relu", 1], [True, 1], [0.5, "0.5"]])
def test_mixed_type_choice_values(values: list) -> None:
    message = only_error([row("act", "choice", values=values)])
    assert message.startswith("Values must all be of one type (all numbers, all text or all "
                              "true/false); got ")


def test_choice_values_must_be_scalars() -> None:
    message = only_error([row("act", "choice", values=[[1], [2]])])
    assert message == "Values must be numbers, text or true/false."


def test_ordered_text_choice() -> None:
    message = only_error([row("act", "choice", ordered=True)])
    assert message == "Only numbers can be ordered; untick Ordered."


@pytest.mark.parametrize("value", [None, "", "  "])
def test_fixed_without_value(value: object) -> None:
    assert only_error([row("opt", "fixed", value=value)]) == "Give the fixed value."


def test_fixed_value_not_scalar() -> None:
    message = only_error([row("opt", "fixed", value=["adam"])])
    assert message == "The fixed value must be a number, text or true/false."


# --- Conditions ---------------------------------------------------------------------------


def optimizer_and_momentum(**momentum: object) -> list[dict]:
    spec = {"parent": "optimizer", "parent_values": ["sgd"], **momentum}
    return [row("optimizer", "choice", values=["adam", "sgd"]),
            row("momentum", "float", min=0.0, max=0.9, **spec)]


def test_unknown_parent() -> None:
    message = only_error(optimizer_and_momentum(parent="optimiser"), index=1)
    assert message == "'Only when' refers to optimiser, which is not in this space."


def test_parent_is_itself() -> None:
    message = only_error(optimizer_and_momentum(parent="momentum", parent_values=[0.5]), index=1)
    assert message == "A hyperparameter cannot depend on itself."


def test_parent_cycle_flags_every_row_in_it() -> None:
    rows = [row("a", "choice", values=["x", "y"], parent="c", parent_values=["x"]),
            row("b", "boolean"),
            row("c", "choice", values=["x", "y"], parent="a", parent_values=["y"])]
    error = errors(rows)
    assert error.row_errors == {
        0: ["The conditions go round in a loop: a → c → a."],
        2: ["The conditions go round in a loop: c → a → c."],
    }


@pytest.mark.parametrize("values", [[], None, ""])
def test_parent_values_empty(values: object) -> None:
    message = only_error(optimizer_and_momentum(parent_values=values), index=1)
    assert message == "Say for which values of optimizer this hyperparameter is used."


def test_parent_values_not_a_choice_value() -> None:
    message = only_error(optimizer_and_momentum(parent_values=["sgd", "adamw"]), index=1)
    assert message == "optimizer never takes 'adamw' (it can be 'adam', 'sgd')."


def test_parent_values_not_a_fixed_value() -> None:
    rows = [row("opt", "fixed", value="adam"),
            row("beta", "float", parent="opt", parent_values=["sgd"])]
    assert only_error(rows, index=1) == "opt never takes 'sgd' (it is always 'adam')."


def test_parent_values_not_boolean() -> None:
    rows = [row("bn", "boolean"), row("momentum", "float", parent="bn", parent_values=["yes"])]
    assert only_error(rows, index=1) == "The value 'yes' of bn must be true or false, not 'yes'."


@pytest.mark.parametrize(("value", "shown"), [(512, "512"), (48, "48"), ("16", "16")])
def test_int_parent_values_outside_range_or_step(value: object, shown: str) -> None:
    rows = [row("layers", "int", min=32, max=256, step=32),
            row("width", "int", parent="layers", parent_values=[value])]
    message = only_error(rows, index=1)
    assert message == f"layers never takes {shown} (it runs from 32 to 256 with step 32)."


def test_int_parent_values_must_be_whole() -> None:
    rows = [row("layers", "int", min=1, max=4, step=None),
            row("width", "int", parent="layers", parent_values=["two"])]
    assert only_error(rows, index=1) == "The value 'two' of layers must be a number, not 'two'."


def test_float_parent_is_refused() -> None:
    rows = [row("dropout", "float", step=0.1),
            row("x", "boolean", parent="dropout", parent_values=[0.1])]
    message = only_error(rows, index=1)
    assert message == "Conditions on a Float are not supported; make dropout a Choice of numbers."


def test_conditions_on_an_invalid_parent_wait_for_the_parent() -> None:
    rows = [row("layers", "int", min=9, max=1),
            row("width", "int", parent="layers", parent_values=[99])]
    assert list(errors(rows).row_errors) == [0]


# --- Happy paths --------------------------------------------------------------------------


def test_dense_defaults_are_already_normalised() -> None:
    assert validate_search_space(DENSE_DEFAULT_SPACE) == DENSE_DEFAULT_SPACE


def test_form_strings_become_numbers_and_keys_are_canonical() -> None:
    raw = [
        {"name": " units ", "type": "Int", "min": "32", "max": "256", "step": "32",
         "sampling": "LINEAR", "values": "ignored", "junk": 1},
        {"name": "lr", "type": "float", "min": "1e-4", "max": "0.01", "step": "",
         "sampling": "log"},
        {"name": "act", "type": "choice", "values": "relu, tanh", "ordered": ""},
        {"name": "width", "type": "choice", "values": [16, 32.0, 64], "ordered": "on"},
        {"name": "bn", "type": "boolean", "parent": "", "parent_values": ["x"]},
        {"name": "opt", "type": "fixed", "value": " adam "},
        {"name": "layers", "type": "int", "min": 1.0, "max": 4, "sampling": None},
    ]
    assert validate_search_space(raw) == [
        {"name": "units", "type": "int", "min": 32, "max": 256, "step": 32, "sampling": "linear",
         "parent": None, "parent_values": []},
        {"name": "lr", "type": "float", "min": 1e-4, "max": 0.01, "step": None, "sampling": "log",
         "parent": None, "parent_values": []},
        {"name": "act", "type": "choice", "values": ["relu", "tanh"], "ordered": False,
         "parent": None, "parent_values": []},
        {"name": "width", "type": "choice", "values": [16.0, 32.0, 64.0], "ordered": True,
         "parent": None, "parent_values": []},
        {"name": "bn", "type": "boolean", "parent": None, "parent_values": []},
        {"name": "opt", "type": "fixed", "value": "adam", "parent": None, "parent_values": []},
        {"name": "layers", "type": "int", "min": 1, "max": 4, "step": None, "sampling": "linear",
         "parent": None, "parent_values": []},
    ]


def test_float_bounds_are_floats() -> None:
    [normalised] = validate_search_space([row("dropout", "float", min=0, max=1, step=1)])
    assert (type(normalised["min"]), type(normalised["max"]), type(normalised["step"])) == (
        float, float, float)


def test_numeric_choice_is_ordered_by_default() -> None:
    raw = {"name": "width", "type": "choice", "values": [16, 32]}
    assert validate_search_space([raw])[0]["ordered"] is True


def test_parent_values_are_coerced_to_the_parent_type() -> None:
    rows = [
        row("layers", "int", min=1, max=4, step=None),
        row("bn", "boolean"),
        row("opt", "choice", values=["adam", "sgd"]),
        row("w", "choice", values=[0.5, 1.0]),
        row("a", "int", parent="layers", parent_values="2, 3, 2"),
        row("b", "int", parent="bn", parent_values=["TRUE"]),
        row("c", "int", parent="opt", parent_values="sgd"),
        row("d", "int", parent="w", parent_values=[1]),
        row("e", "int", parent="a", parent_values=[64]),  # grandchild
    ]
    result = validate_search_space(rows)
    assert [r["parent_values"] for r in result[4:]] == [[2, 3], [True], ["sgd"], [1.0], [64]]


def test_child_may_come_before_its_parent() -> None:
    rows = [row("momentum", "float", parent="optimizer", parent_values=["sgd"]),
            row("optimizer", "choice", values=["adam", "sgd"])]
    result = validate_search_space(rows)
    assert [r["name"] for r in result] == ["momentum", "optimizer"]  # input order kept
    assert [r["name"] for r in parents_first(result)] == ["optimizer", "momentum"]


def test_log_parent_with_step_accepts_grid_values() -> None:
    rows = [row("batch", "int", min=2, max=32, step=2, sampling="log"),
            row("x", "boolean", parent="batch", parent_values=[4, 32])]
    assert validate_search_space(rows)[1]["parent_values"] == [4, 32]
    rows[1]["parent_values"] = [6]
    assert only_error(rows, index=1).startswith("batch never takes 6")


def test_input_rows_are_not_modified() -> None:
    raw = [{"name": "units", "type": "int", "min": "1", "max": "4"}]
    validate_search_space(raw)
    assert raw == [{"name": "units", "type": "int", "min": "1", "max": "4"}]


# --- parse_choice_values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16, 32, 64", [16, 32, 64]),
        ("0.1,0.5", [0.1, 0.5]),
        ("1, 0.5, 2", [1.0, 0.5, 2.0]),
        ("1e-3, 1E-2", [0.001, 0.01]),
        ("-1, +2", [-1, 2]),
        ("relu, tanh", ["relu", "tanh"]),
        ("relu, 1", ["relu", "1"]),
        ("true,false", [True, False]),
        ("True, FALSE", [True, False]),
        ("true, 1", ["true", "1"]),
        ("inf, nan", ["inf", "nan"]),
        ("1_000", ["1_000"]),
        ("16, , 32,", [16, 32]),
        ("", []),
        ("  sgd  ", ["sgd"]),
    ],
)
def test_parse_choice_values(text: str, expected: list) -> None:
    parsed = parse_choice_values(text)
    assert parsed == expected
    assert [type(v) for v in parsed] == [type(v) for v in expected]


# --- grid_size ----------------------------------------------------------------------------


def test_grid_size_of_the_dense_defaults_is_none_because_lr_has_no_step() -> None:
    assert grid_size(validate_search_space(DENSE_DEFAULT_SPACE)) is None


def test_grid_size_simple_product() -> None:
    rows = validate_search_space([
        row("units", min=32, max=256, step=32),  # 8
        row("act", "choice", values=["relu", "tanh", "gelu"]),  # 3
        row("bn", "boolean"),  # 2
        row("opt", "fixed", value="adam"),  # 1
        row("layers", min=1, max=3, step=None),  # 3 (Int's step defaults to 1)
    ])
    assert grid_size(rows) == 8 * 3 * 2 * 1 * 3


def test_grid_size_follows_keras_tuner_float_steps() -> None:
    # KerasTuner computes (max - min) // step + 1 in floats: 0.5 // 0.1 == 4, so 0.5 is
    # never tried and there are 5 values, not 6.
    rows = validate_search_space([row("dropout", "float", min=0.0, max=0.5, step=0.1)])
    assert grid_size(rows) == 5


def test_grid_size_log_steps() -> None:
    rows = validate_search_space([
        row("lr", "float", min=1e-4, max=1e-1, step=10, sampling="log"),  # 4
        row("batch", "int", min=2, max=32, step=2, sampling="log"),  # 5
    ])
    assert grid_size(rows) == 20


def test_grid_size_int_log_without_step_uses_ten_samples() -> None:
    rows = validate_search_space([row("units", min=1, max=1000, step=None, sampling="log")])
    assert grid_size(rows) == 10
    rows = validate_search_space([row("units", min=1, max=3, step=None, sampling="log")])
    assert grid_size(rows) == 3  # the ten samples collapse to 1, 2, 3


def test_grid_size_counts_conditional_rows_only_under_their_parent_values() -> None:
    rows = validate_search_space([
        row("opt", "choice", values=["adam", "sgd", "rmsprop"]),
        row("momentum", "choice", values=[0.0, 0.9], parent="opt", parent_values=["sgd"]),
        row("nesterov", "boolean", parent="momentum", parent_values=[0.9]),
        row("rho", "choice", values=[0.9, 0.95, 0.99], parent="opt",
            parent_values=["rmsprop", "sgd"]),
        row("bn", "boolean"),
    ])
    # adam: 1; sgd: momentum (0.0 -> 1, 0.9 -> 2 nesterov) = 3, times rho 3 = 9; rmsprop: 3.
    assert grid_size(rows) == (1 + 9 + 3) * 2


def test_grid_size_none_for_a_conditional_float_without_step() -> None:
    rows = validate_search_space(optimizer_and_momentum())
    assert grid_size(rows) is None


def test_web_module_does_not_import_tensorflow() -> None:
    # A fresh interpreter: this test process may already hold TensorFlow from other tests.
    code = ("import sys, experiments.tuning.search_space; "
            "print(sorted(m for m in ('tensorflow', 'keras', 'keras_tuner') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).resolve().parents[2])
    assert result.stdout.strip() == "[]"
