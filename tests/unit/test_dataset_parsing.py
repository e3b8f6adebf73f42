"""Parsing uploads and bundled datasets into arrays, and the messages people see when it fails."""

import io

import numpy as np
import pytest

from experiments.datasets.bundled import BUNDLED, load_bundled
from experiments.datasets.core import ParsedDataset, check_upload_size
from experiments.datasets.parsing import parse_npz
from experiments.datasets.splits import split_indices
from experiments.datasets.tabular_reader import parse_csv
from tests.unit.parsing_helpers import npz_bytes, rejects

MB = 1024 * 1024




def labelled_csv(n: int = 20) -> bytes:
    rows = "\n".join(f"{i},{i * 2},{'yes' if i % 2 else 'no'}" for i in range(n))
    return f"a,b,label\n{rows}\n".encode()


# --- upload size ----------------------------------------------------------------------------


def test_it_rejects_a_file_over_the_size_limit():
    rejects(["The file is 61.2 MB; the limit is 50 MB."], check_upload_size, int(61.2 * MB), 50)


def test_it_names_the_exact_size_when_rounding_would_hide_the_excess():
    rejects(["just over the limit of 50 MB"], check_upload_size, 50 * MB + 10, 50)


def test_it_accepts_a_file_exactly_at_the_size_limit():
    check_upload_size(50 * MB, 50)


# --- bundled datasets -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "shape", "n_classes"),
    [
        ("digits", (1797, 64), 10),
        ("wine", (178, 13), 3),
        ("iris", (150, 4), 3),
        ("breast_cancer", (569, 30), 2),
    ],
)
def test_each_bundled_dataset_loads_as_classification_with_the_right_shape(name, shape, n_classes):
    parsed = load_bundled(name)
    assert name in BUNDLED and BUNDLED[name]
    assert parsed.x.shape == shape and parsed.x.dtype == np.float32
    assert parsed.y.shape == (shape[0],) and parsed.y.dtype == np.int64
    assert parsed.task == "classification"
    assert len(parsed.classes) == n_classes == len(set(parsed.y.tolist()))
    assert len(parsed.feature_names) == parsed.n_features == shape[1]
    assert parsed.input_shape == [shape[1]] and parsed.n_rows == shape[0]


def test_bundled_class_names_are_the_human_names():
    assert load_bundled("iris").classes == ["setosa", "versicolor", "virginica"]
    assert load_bundled("digits").classes == [str(d) for d in range(10)]


def test_it_rejects_an_unknown_bundled_dataset_and_lists_the_choices():
    rejects(["'mnist'", "digits, wine, iris, breast_cancer"], load_bundled, "mnist")


# --- CSV: happy paths -----------------------------------------------------------------------


def test_a_csv_with_string_labels_becomes_sorted_classes():
    parsed = parse_csv(labelled_csv(), target_column="label")
    assert parsed.task == "classification"
    assert parsed.classes == ["no", "yes"]
    assert parsed.y.dtype == np.int64 and parsed.y[:4].tolist() == [0, 1, 0, 1]
    assert parsed.feature_names == ["a", "b"]
    assert parsed.x.dtype == np.float32 and parsed.x.shape == (20, 2)
    assert parsed.class_counts == {"no": 10, "yes": 10}


def test_the_target_column_can_sit_anywhere_and_its_neighbours_stay_features():
    parsed = parse_csv(b"label,a,b\ncat,1,2\ndog,3,4\ncat,5,6\n", target_column="label")
    assert parsed.feature_names == ["a", "b"]
    assert parsed.x.tolist() == [[1, 2], [3, 4], [5, 6]]


def test_a_csv_with_a_float_target_is_regression():
    rows = "\n".join(f"{i},{i * 0.5 + 0.1}" for i in range(10))
    parsed = parse_csv(f"x,price\n{rows}\n".encode(), target_column="price")
    assert parsed.task == "regression" and parsed.classes == []
    assert parsed.y.dtype == np.float32
    assert parsed.y[1] == pytest.approx(0.6)
    assert parsed.class_counts == {}


def test_auto_reads_few_distinct_integers_as_classes_in_numeric_order():
    rows = "\n".join(f"{i},{[10, 2, 1][i % 3]}" for i in range(12))
    parsed = parse_csv(f"x,y\n{rows}\n".encode(), target_column="y")
    assert parsed.task == "classification"
    assert parsed.classes == ["1", "2", "10"]  # numeric order, not "1", "10", "2"
    assert parsed.y[:3].tolist() == [2, 1, 0]


def test_auto_reads_many_distinct_integers_as_regression():
    rows = "\n".join(f"{i},{i * 3}" for i in range(10))
    assert parse_csv(f"x,y\n{rows}\n".encode(), target_column="y").task == "regression"


def test_integer_labels_written_as_floats_are_one_class():
    csv = b"x,y\n1,1.0\n2,1\n3,0\n4,0.0\n5,1\n6,0\n"
    parsed = parse_csv(csv, target_column="y", task="classification")
    assert parsed.classes == ["0", "1"] and parsed.y.tolist() == [1, 1, 0, 0, 1, 0]


def test_a_forced_task_overrides_auto():
    rows = "\n".join(f"{i},{i % 2}" for i in range(10))
    parsed = parse_csv(f"x,y\n{rows}\n".encode(), target_column="y", task="regression")
    assert parsed.task == "regression"


def test_it_reads_semicolons_tabs_a_bom_padding_and_blank_lines():
    semicolons = "\ufeff a ; b ;label \n\n1;2;x\n  \n3;4;y\n\n".encode()
    tabs = b"a\tb\tlabel\n1\t2\tx\n3\t4\ty\n"
    for data in (semicolons, tabs):
        parsed = parse_csv(data, target_column="label")
        assert parsed.feature_names == ["a", "b"]
        assert parsed.x.tolist() == [[1, 2], [3, 4]] and parsed.classes == ["x", "y"]


def test_it_ignores_empty_trailing_columns_from_spreadsheets():
    parsed = parse_csv(b"a,label,,\n1,x,,\n2,y,,\n", target_column="label")
    assert parsed.feature_names == ["a"]


def test_preview_shows_the_first_rows_with_feature_values_and_the_class_name():
    parsed = parse_csv(b"a,b,label\n0.1,2,x\n3,4,y\n5,6,x\n", target_column="label")
    assert parsed.preview(2) == [
        {"a": 0.1, "b": 2.0, "label": "x"},
        {"a": 3.0, "b": 4.0, "label": "y"},
    ]
    assert len(parsed.preview()) == 3


# --- CSV: bad input -------------------------------------------------------------------------


def test_it_rejects_a_file_that_is_not_utf8_text():
    rejects(["not UTF-8"], parse_csv, b"caf\xe9,label\n1,x\n", target_column="label")


def test_it_rejects_a_binary_file_uploaded_as_csv():
    data = npz_bytes(x=np.zeros((2, 2)), y=np.zeros(2))
    rejects(["not CSV text"], parse_csv, data, target_column="label")
    rejects(["binary file"], parse_csv, b"\x00\x01\x02abc", target_column="label")


def test_it_rejects_an_empty_csv():
    rejects(["The file is empty."], parse_csv, b"", target_column="label")
    rejects(["The file is empty."], parse_csv, b"\n  \n\n", target_column="label")


def test_it_rejects_a_csv_with_only_a_header_row():
    rejects(["header row but no data rows"], parse_csv, b"a,label\n\n", target_column="label")


def test_it_rejects_a_csv_without_the_target_column_and_lists_the_available_ones():
    rejects(
        ["no column named 'target'", "Available columns: a, b, label"],
        parse_csv,
        labelled_csv(),
        target_column="target",
    )


def test_it_hints_at_a_missing_header_row_when_the_first_row_is_numbers():
    rejects(["needs a header row"], parse_csv, b"1,2,3\n4,5,6\n", target_column="label")


def test_it_rejects_a_csv_with_only_the_target_column():
    rejects(["no feature columns"], parse_csv, b"label\nx\ny\n", target_column="label")


def test_it_rejects_non_numeric_feature_values_naming_the_column_value_and_row():
    csv = b"a,colour,label\n1,2,x\n3,red,y\n4,blue,x\n"
    rejects(
        ["Column 'colour'", "row 3 has 'red'", "1 more row has non-numeric values"],
        parse_csv,
        csv,
        target_column="label",
    )


def test_it_suggests_a_decimal_point_when_a_value_uses_a_decimal_comma():
    csv = b"a;b;label\n1,5;2;x\n3;4;y\n"
    rejects(["row 2 has '1,5'", "decimal separator"], parse_csv, csv, target_column="label")


def test_it_rejects_missing_feature_values_naming_the_column_and_rows():
    csv = b"a,b,label\n1,,x\n2,NA,y\n3,4,x\n,5,y\n"
    rejects(
        ["column 'a' in 1 row (first row 5)", "column 'b' in 2 rows (first row 2)"],
        parse_csv,
        csv,
        target_column="label",
    )


def test_it_rejects_rows_without_a_label_and_says_how_many():
    csv = b"a,label\n1,x\n2,\n3,y\n4,nan\n5,x\n"
    rejects(
        ["2 rows have no value in the target column 'label'", "(rows 3, 5)"],
        parse_csv,
        csv,
        target_column="label",
    )


def test_it_rejects_a_target_with_only_one_class():
    csv = b"a,label\n1,spam\n2,spam\n3,spam\n"
    rejects(["only one class ('spam')", "at least two"], parse_csv, csv, target_column="label")


def test_it_rejects_regression_on_a_non_numeric_target():
    csv = b"a,price\n1,10\n2,cheap\n"
    rejects(
        ["non-numeric values such as 'cheap' (row 3)", "regression"],
        parse_csv,
        csv,
        target_column="price",
        task="regression",
    )


def test_it_rejects_a_row_with_the_wrong_number_of_values():
    csv = b"a,b,label\n1,2,x\n3,y\n"
    rejects(
        ["Row 3 has 2 values, but the header has 3 columns."], parse_csv, csv, target_column="label"
    )


def test_it_rejects_duplicate_column_names():
    rejects(
        ["two columns named 'a' (columns 1 and 2)"],
        parse_csv,
        b"a,a,label\n1,2,x\n",
        target_column="label",
    )


def test_it_rejects_an_unknown_task():
    rejects(
        ["Unknown task 'clustering'"],
        parse_csv,
        labelled_csv(),
        target_column="label",
        task="clustering",
    )


# --- NPZ ------------------------------------------------------------------------------------


def test_a_tabular_npz_with_three_axes_keeps_its_shape_and_flattens_a_column_y():
    x = np.random.default_rng(0).random((20, 4, 4))
    y = (np.arange(20) % 2).reshape(20, 1)
    parsed = parse_npz(npz_bytes(x=x, y=y), kind="tabular")  # "auto" would read these as sequences
    assert parsed.x.shape == (20, 4, 4) and parsed.x.dtype == np.float32
    assert parsed.input_shape == [4, 4] and parsed.n_features == 16
    assert parsed.feature_names == [f"f{i}" for i in range(16)]
    assert parsed.y.shape == (20,) and parsed.task == "classification"
    assert parsed.classes == ["0", "1"]
    assert set(parsed.preview(1)[0]) == {*parsed.feature_names, "y"}


def test_an_npz_with_string_labels_and_float_targets():
    x = np.arange(12.0).reshape(6, 2)
    labelled = parse_npz(npz_bytes(x=x, y=np.array(["b", "a", "b", "a", "c", "c"])))
    assert labelled.classes == ["a", "b", "c"] and labelled.y.tolist() == [1, 0, 1, 0, 2, 2]
    regression = parse_npz(npz_bytes(x=x, y=np.linspace(0, 1, 6)), task="auto")
    assert regression.task == "regression" and regression.y.dtype == np.float32


def test_it_rejects_a_file_that_is_not_an_npz_archive():
    rejects(["not a valid .npz archive"], parse_npz, b"a,b\n1,2\n")


def test_it_rejects_a_corrupt_npz_archive():
    data = npz_bytes(x=np.zeros((50, 3)), y=np.zeros(50))
    rejects(["not a valid .npz archive"], parse_npz, data[: len(data) // 2])


def test_it_rejects_a_single_npy_array():
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    rejects([".npy"], parse_npz, buffer.getvalue())


def test_it_rejects_an_npz_without_y_and_lists_what_it_contains():
    rejects(
        ["no array named 'y'", "contains x, labels"],
        parse_npz,
        npz_bytes(x=np.zeros((3, 2)), labels=np.zeros(3)),
    )


def test_it_rejects_an_npz_whose_x_and_y_lengths_differ():
    rejects(["x has 10 rows but y has 9"], parse_npz, npz_bytes(x=np.zeros((10, 2)), y=np.zeros(9)))


def test_it_rejects_an_npz_with_empty_arrays():
    rejects(["empty"], parse_npz, npz_bytes(x=np.zeros((0, 2)), y=np.zeros(0)))


def test_it_rejects_nan_labels_in_an_npz_and_says_how_many():
    y = np.array([0.0, 1.0, np.nan, 1.0, np.nan, 0.0])
    rejects(
        ["2 rows have a missing (NaN or empty) label"],
        parse_npz,
        npz_bytes(x=np.zeros((6, 2)), y=y),
    )


def test_it_rejects_missing_values_in_npz_inputs():
    x = np.ones((6, 2))
    x[3, 1] = np.nan
    rejects(
        ["missing (NaN) or infinite values", "in 1 row (the first is data row 4)"],
        parse_npz,
        npz_bytes(x=x, y=np.arange(6) % 2),
    )


def test_it_rejects_a_one_hot_y():
    rejects(
        ["one label per row", "(4, 2)", "argmax"],
        parse_npz,
        npz_bytes(x=np.zeros((4, 2)), y=np.eye(2)[[0, 1, 0, 1]]),
    )


def test_it_rejects_non_numeric_x():
    rejects(
        ["x must contain numbers"],
        parse_npz,
        npz_bytes(x=np.array([["a"], ["b"]]), y=np.array([0, 1])),
    )


def test_it_rejects_an_npz_holding_python_objects():
    buffer = io.BytesIO()
    np.savez(buffer, x=np.array([{"a": 1}, {"b": 2}], dtype=object), y=np.array([0, 1]))
    rejects(["could not be read", "Python objects"], parse_npz, buffer.getvalue())


def test_it_rejects_an_npz_target_with_only_one_class():
    rejects(
        ["only one class ('3')"],
        parse_npz,
        npz_bytes(x=np.zeros((4, 2)), y=np.full(4, 3)),
        task="classification",
    )


# --- splitting ------------------------------------------------------------------------------


def test_a_split_is_deterministic_disjoint_sorted_and_covers_every_row():
    parsed = load_bundled("wine")
    first = split_indices(parsed, val_fraction=0.2, test_fraction=0.1, seed=7)
    again = split_indices(parsed, val_fraction=0.2, test_fraction=0.1, seed=7)
    other = split_indices(parsed, val_fraction=0.2, test_fraction=0.1, seed=8)
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(first[2], other[2])
    train, val, test = first
    assert [len(train), len(val), len(test)] == [124, 36, 18]  # round(178*.2), round(178*.1), rest
    assert sorted(np.concatenate(first).tolist()) == list(range(178))
    for part in first:
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)


def test_a_stratified_split_keeps_every_iris_class_in_every_part():
    parsed = load_bundled("iris")
    for part in split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=1):
        assert set(parsed.y[part].tolist()) == {0, 1, 2}
        assert np.bincount(parsed.y[part]).max() - np.bincount(parsed.y[part]).min() <= 1


def test_a_split_falls_back_to_unstratified_when_a_class_has_one_row():
    x = np.arange(20.0).reshape(10, 2)
    y = np.array([0, 0, 0, 0, 0, 1, 1, 1, 1, 2])
    parsed = ParsedDataset(x, y, ["a", "b"], "classification", ["p", "q", "r"])
    parts = split_indices(parsed, val_fraction=0.2, test_fraction=0.2, seed=0)
    assert [len(p) for p in parts] == [6, 2, 2]


def test_a_regression_dataset_splits_too():
    parsed = parse_npz(npz_bytes(x=np.zeros((10, 1)), y=np.linspace(0, 1, 10)))
    assert [len(p) for p in split_indices(parsed, val_fraction=0.1, test_fraction=0.1, seed=0)] == [
        8,
        1,
        1,
    ]


def test_it_rejects_a_split_with_too_few_rows_and_says_how_many_are_needed():
    parsed = parse_csv(b"a,y\n1,0.5\n2,1.5\n", target_column="y")
    rejects(
        [
            "has 2 rows",
            "20% validation and 20% test needs at least 3 rows",
            "each get at least one row",
        ],
        split_indices,
        parsed,
        val_fraction=0.2,
        test_fraction=0.2,
        seed=0,
    )


@pytest.mark.parametrize(
    ("val", "test", "expected"),
    [
        (0, 0.2, "validation fraction must be between 0 and 1"),
        (0.2, 1.0, "test fraction must be between 0 and 1"),
        (-0.1, 0.2, "validation fraction"),
        (0.5, 0.5, "add up to 1; they must add up to less than 1"),
    ],
)
def test_it_rejects_invalid_split_fractions(val, test, expected):
    rejects(
        [expected],
        split_indices,
        load_bundled("iris"),
        val_fraction=val,
        test_fraction=test,
        seed=0,
    )
