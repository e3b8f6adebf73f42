"""What a batch prediction's CSV says: the label by class name and a probability per class (a
binary model's single sigmoid output included), or the values for regression; every number
written so that it reads back as the same float32."""

import csv
import io

import numpy as np

from experiments.presentation.prediction_csv import (
    prediction_preview,
    preview_columns,
    probability_text,
    write_prediction_csv,
)


def _table(outputs, **kwargs) -> list[list[str]]:
    buffer = io.StringIO()
    write_prediction_csv(buffer, outputs, **kwargs)
    return list(csv.reader(io.StringIO(buffer.getvalue())))


def test_classification_rows_name_the_label_and_every_class_probability_exactly():
    outputs = np.random.default_rng(0).dirichlet(np.ones(3), size=5000).astype(np.float32)
    rows = _table(outputs, task="classification", classes=["cat", "dog", "owl"], names=[])
    assert rows[0] == ["row", "label", "cat", "dog", "owl"]
    assert len(rows) == 5001 and rows[-1][0] == "5000"
    read = np.array([[np.float32(cell) for cell in row[2:]] for row in rows[1:]])
    np.testing.assert_array_equal(read, outputs)
    assert [row[1] for row in rows[1:]] == [["cat", "dog", "owl"][i] for i in outputs.argmax(axis=1)]


def test_a_single_sigmoid_output_is_the_second_class_probability():
    preview = prediction_preview(np.array([[0.25], [0.75]], np.float32), task="classification",
                                 classes=["no", "yes"], names=["a.png", "b.png"])
    assert preview == [{"row": "1", "file": "a.png", "label": "no", "no": "0.75", "yes": "0.25"},
                       {"row": "2", "file": "b.png", "label": "yes", "no": "0.25", "yes": "0.75"}]


def test_regression_rows_hold_the_values():
    assert _table(np.array([1.5, -2.25], np.float32), task="regression", classes=[], names=[]) == [
        ["row", "prediction"], ["1", "1.5"], ["2", "-2.25"]]
    assert _table(np.ones((1, 2), np.float32), task="regression", classes=[], names=[])[0] == [
        "row", "prediction_0", "prediction_1"]


def test_cells_users_wrote_cannot_start_a_spreadsheet_formula_and_negative_numbers_stay_numbers():
    rows = _table(np.array([[0.25], [0.75]], np.float32), task="classification", classes=["=no", "@yes"],
                  names=["=HYPERLINK(1).png", "b.png"])
    assert rows == [["row", "file", "label", "'=no", "'@yes"],
                    ["1", "'=HYPERLINK(1).png", "'=no", "0.75", "0.25"],
                    ["2", "b.png", "'@yes", "0.25", "0.75"]]
    assert _table(np.array([-1.5], np.float32), task="regression", classes=[], names=["-a.png"])[1] == [
        "1", "'-a.png", "-1.5"]


def test_pages_show_probabilities_as_fixed_decimals_never_a_rounded_0_or_1_that_is_not_one():
    shown = [probability_text(p) for p in (1.4580002e-05, 0.00005, 0.12345678, 0.99994, 0.9999854, 0.0, 1.0)]
    assert shown == ["<0.0001", "0.0001", "0.1235", "0.9999", ">0.9999", "0.0000", "1.0000"]


def test_the_preview_columns_come_back_in_the_csvs_order_whatever_order_the_row_was_stored_in():
    digits = [str(d) for d in range(10)]
    # As PostgreSQL's jsonb hands the row back: keys by length, then bytes.
    stored = {**{d: "0.1" for d in digits}, "row": "1", "file": "a.png", "label": "3"}
    assert preview_columns(stored, task="classification", classes=digits) == [
        ("row", False), ("file", False), ("label", False), *((d, True) for d in digits)]
    assert preview_columns({"virginica": "0.2", "row": "1", "label": "setosa", "setosa": "0.5", "versicolor": "0.3"},
                           task="classification", classes=["setosa", "versicolor", "virginica"]) == [
        ("row", False), ("label", False), ("setosa", True), ("versicolor", True), ("virginica", True)]
    # A class named "file" is a probability, not the images' file names.
    assert preview_columns({"row": "1", "label": "file", "file": "0.9", "other": "0.1"}, task="classification",
                           classes=["file", "other"]) == [("row", False), ("label", False), ("file", True),
                                                          ("other", True)]
    wide = {f"prediction_{i}": "1.5" for i in range(12)} | {"row": "1"}
    assert [name for name, _ in preview_columns(wide, task="regression", classes=[])] == [
        "row", *(f"prediction_{i}" for i in range(12))]
