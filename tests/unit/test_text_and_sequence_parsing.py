"""Text from a CSV column, sequences from an .npz or as sliding windows over a time-series
CSV, and the time-ordered split that never lets a time step into two parts."""

import io

import numpy as np
import pytest

from experiments.datasets.core import ParsedDataset
from experiments.datasets.parsing import parse_npz
from experiments.datasets.sequence_reader import parse_time_series_csv
from experiments.datasets.splits import split_indices
from experiments.datasets.text_reader import parse_text_csv
from tests.unit.parsing_helpers import npz_bytes, rejects

REVIEWS = (
    b'id,review,label\n1,"Great kettle, boils fast",pos\n2,Broke after a week,neg\n'
    b"3,Love it,pos\n4,Waste of money and time,neg\n"
)


def series_csv(n: int = 30) -> bytes:
    """date (ignored), temp = 10 + row, humidity = 50 - row."""
    rows = "\n".join(f"2024-01-{i + 1:02d},{10 + i},{50 - i}" for i in range(n))
    return f"date,temp,humidity\n{rows}\n".encode()


# --- text ---------------------------------------------------------------------------------


def test_a_text_csv_keeps_the_text_column_as_a_unicode_array():
    parsed = parse_text_csv(REVIEWS, text_column="review", target_column="label")
    assert parsed.kind == "text" and parsed.task == "classification"
    assert parsed.x.dtype.kind == "U" and parsed.x.shape == (4,)
    assert parsed.x.tolist() == ["Great kettle, boils fast", "Broke after a week", "Love it", "Waste of money and time"]
    assert parsed.classes == ["neg", "pos"] and parsed.y.tolist() == [1, 0, 1, 0]
    assert parsed.feature_names == ["review"] and parsed.target_name == "label"
    assert parsed.input_shape == [] and parsed.n_features == 1
    assert parsed.details == {"text_column": "review", "mean_words": 3.75, "max_words": 5, "ignored_columns": ["id"]}
    assert parsed.preview(1) == [{"review": "Great kettle, boils fast", "label": "pos"}]


def test_texts_survive_savez_without_pickle():
    parsed = parse_text_csv(REVIEWS, text_column="review", target_column="label")
    again = np.load(io.BytesIO(npz_bytes(x=parsed.x)), allow_pickle=False)["x"]
    assert again.tolist() == parsed.x.tolist()


def test_the_preview_shows_the_first_200_characters_of_a_long_text():
    long = "word " * 100
    parsed = parse_text_csv(f"text,y\n{long},a\nshort,b\n".encode(), text_column="text", target_column="y")
    assert parsed.preview(1)[0]["text"] == long.strip()[:200]


def test_a_text_csv_with_a_numeric_target_can_be_regression():
    data = b"review,stars\nfine,3.5\ngreat,4.8\nbad,1.2\nok,2.9\n"
    parsed = parse_text_csv(data, text_column="review", target_column="stars")
    assert parsed.task == "regression" and parsed.y.dtype == np.float32 and parsed.classes == []


def test_it_refuses_a_missing_text_or_target_column_and_lists_the_columns():
    rejects(["no column named 'body'", "Available columns: id, review, label"], parse_text_csv, REVIEWS,
            text_column="body", target_column="label")  # fmt: skip
    rejects(["no column named 'stars'"], parse_text_csv, REVIEWS, text_column="review", target_column="stars")


def test_it_refuses_the_same_column_as_text_and_target():
    rejects(["both 'review'"], parse_text_csv, REVIEWS, text_column="review", target_column="review")


def test_it_refuses_a_text_column_that_is_empty_in_every_row():
    data = b"review,notes,label\n,x,a\n,y,b\n"
    rejects(["The text column 'review' is empty in every row"], parse_text_csv, data,
            text_column="review", target_column="label")  # fmt: skip


def test_it_refuses_rows_without_text_and_names_them():
    data = b"review,label\ngood,a\n,b\nbad,a\n  ,b\n"
    rejects(["2 rows have no text in the column 'review' (rows 3, 5)"], parse_text_csv, data,
            text_column="review", target_column="label")  # fmt: skip


def test_it_refuses_rows_without_a_label():
    data = b"review,label\ngood,a\nbad,\nmeh,b\n"
    rejects(["1 row has no value in the target column 'label' (row 3)"], parse_text_csv, data,
            text_column="review", target_column="label")  # fmt: skip


def test_it_hints_at_quoting_when_a_text_holds_the_delimiter():
    data = b"review,label\ngood,a\nGood, but pricey,b\n"
    rejects(["Row 3 has 3 values", "double quotes"], parse_text_csv, data, text_column="review", target_column="label")


# --- time-series CSV ------------------------------------------------------------------------


def test_a_time_series_becomes_windows_labelled_horizon_steps_later():
    parsed = parse_time_series_csv(series_csv(30), target_column="temp", window=5, horizon=2)
    assert parsed.kind == "sequence" and parsed.time_ordered and parsed.task == "regression"
    assert parsed.x.dtype == np.float32 and parsed.x.shape == (24, 5, 2)  # 30 - 5 - 2 + 1 windows
    assert parsed.feature_names == ["temp", "humidity"]
    assert parsed.x[0].tolist() == [[10 + r, 50 - r] for r in range(5)]
    assert parsed.x[7].tolist() == [[17 + r, 43 - r] for r in range(5)]
    # window rows 0..4, horizon 2: the label is temp at row 6, then one row further per window.
    assert parsed.y.tolist() == [16.0 + i for i in range(24)]
    assert parsed.details == {
        "timesteps": 5,
        "features": 2,
        "source_format": "csv",
        "window": 5,
        "horizon": 2,
        "target_column": "temp",
        "ignored_columns": ["date"],
    }
    assert parsed.preview(1) == [{"sequence": "5×2", "temp": 16.0}]


def test_a_time_series_target_of_words_is_a_class_label_and_not_a_feature():
    rows = "\n".join(f"{i % 5},{'up' if i % 3 else 'down'}" for i in range(20))
    parsed = parse_time_series_csv(f"load,state\n{rows}\n".encode(), target_column="state", window=3,
                                   task="classification")  # fmt: skip
    assert parsed.feature_names == ["load"] and parsed.details["ignored_columns"] == []
    assert parsed.classes == ["down", "up"] and parsed.x.shape == (17, 3, 1)
    assert parsed.y[0] == (1 if 3 % 3 else 0)  # the label of row 3


@pytest.mark.parametrize(("window", "horizon", "name"), [(0, 1, "window"), (3, 0, "horizon"), (2.5, 1, "window")])
def test_it_refuses_a_window_or_horizon_below_one_step(window, horizon, name):
    rejects([f"The {name} must be a whole number of time steps, at least 1"], parse_time_series_csv,
            series_csv(), target_column="temp", window=window, horizon=horizon)  # fmt: skip


def test_it_refuses_a_window_and_horizon_longer_than_the_series():
    rejects(["The window (8) plus the horizon (3) is longer than the series (10 rows)"], parse_time_series_csv,
            series_csv(10), target_column="temp", window=8, horizon=3)  # fmt: skip


def test_it_refuses_a_series_with_too_few_windows():
    rejects(["gives only 9 windows of 2 rows with a horizon of 2", "at least 10"], parse_time_series_csv,
            series_csv(12), target_column="temp", window=2, horizon=2)  # fmt: skip


def test_it_refuses_non_numeric_cells_in_a_numeric_column():
    data = b"temp,humidity\n" + b"".join(f"{i},{'high' if i == 4 else i}\n".encode() for i in range(20))
    rejects(["Column 'humidity' must contain numbers, but row 6 has 'high'"], parse_time_series_csv, data,
            target_column="temp", window=3)  # fmt: skip


def test_it_refuses_missing_values_and_says_to_fill_them_rather_than_drop_rows():
    data = b"temp,humidity\n" + b"".join(f"{'' if i == 4 else i},{i}\n".encode() for i in range(20))
    rejects(["column 'temp' in 1 row (first row 6)", "previous value"], parse_time_series_csv, data,
            target_column="temp", window=3)  # fmt: skip


def test_it_refuses_a_missing_target_column_in_a_time_series():
    rejects(["no column named 'rain'", "temp, humidity"], parse_time_series_csv, series_csv(),
            target_column="rain", window=3)  # fmt: skip


# --- sequences in an .npz -------------------------------------------------------------------


def test_a_float_npz_of_three_axes_is_sequences():
    x = np.random.default_rng(0).random((10, 7, 3))
    parsed = parse_npz(npz_bytes(x=x, y=np.arange(10) % 2))
    assert parsed.kind == "sequence" and not parsed.time_ordered
    assert parsed.x.dtype == np.float32 and parsed.x.shape == (10, 7, 3)
    assert parsed.feature_names == ["f0", "f1", "f2"] and parsed.input_shape == [7, 3]
    assert parsed.details == {"timesteps": 7, "features": 3, "source_format": "npz"}
    assert parsed.preview(1) == [{"sequence": "7×3", "y": "0"}]


def test_a_two_axis_npz_forced_to_sequences_gets_one_feature_per_step():
    x = np.arange(40, dtype=np.int32).reshape(4, 10)
    parsed = parse_npz(npz_bytes(x=x, y=np.array([0, 1, 0, 1])), kind="sequence")
    assert parsed.x.shape == (4, 10, 1) and parsed.x.dtype == np.float32
    assert parsed.x[1, :, 0].tolist() == list(range(10, 20))


def test_a_uint8_three_axis_npz_is_images_unless_sequences_are_asked_for():
    x = np.zeros((4, 5, 6), dtype=np.uint8)
    y = np.array([0, 1, 0, 1])
    assert parse_npz(npz_bytes(x=x, y=y)).kind == "image"
    assert parse_npz(npz_bytes(x=x, y=y), kind="sequence").x.shape == (4, 5, 6)


def test_two_axes_stay_tabular_and_tabular_can_be_forced_on_three():
    y = np.array([0, 1, 0, 1])
    assert parse_npz(npz_bytes(x=np.zeros((4, 3)), y=y)).kind == "tabular"
    forced = parse_npz(npz_bytes(x=np.zeros((4, 2, 3)), y=y), kind="tabular")
    assert forced.kind == "tabular" and forced.x.shape == (4, 2, 3) and len(forced.feature_names) == 6


def test_it_refuses_non_finite_sequence_values_with_the_count():
    x = np.zeros((5, 4, 2))
    x[1, 0, 0] = x[1, 2, 1] = np.inf
    x[3, 3, 0] = np.nan
    rejects(["x has 3 missing (NaN) or infinite values", "in 2 sequences (the first is x[1])"], parse_npz,
            npz_bytes(x=x, y=np.arange(5) % 2))  # fmt: skip


def test_a_forced_sequence_kind_needs_a_sequence_shape_and_kinds_are_checked():
    data = npz_bytes(x=np.zeros((4, 2, 2, 2)), y=np.array([0, 1, 0, 1]))
    rejects(["Sequences need x of shape (n, steps) or (n, steps, features)", "4×2×2×2"], parse_npz, data,
            kind="sequence")  # fmt: skip
    rejects(["Unknown kind 'text'"], parse_npz, data, kind="text")


# --- the time-ordered split -----------------------------------------------------------------


def touched_rows(samples: np.ndarray, window: int, horizon: int) -> set[int]:
    """Rows of the series a set of windowed samples reads, as input or as label."""
    return {row for i in samples.tolist() for row in range(i, i + window + horizon)}


def test_a_time_ordered_split_is_contiguous_blocks_with_no_shared_time_step():
    window, horizon = 5, 2
    parsed = parse_time_series_csv(series_csv(100), target_column="temp", window=window, horizon=horizon)
    n = parsed.n_rows  # 94 windows
    train, val, test = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=0)
    assert [len(val), len(test)] == [round(n * 0.15), round(n * 0.15)]
    assert len(train) == n - 2 * round(n * 0.15) - 2 * (window + horizon - 1)
    for part in (train, val, test):
        assert part.dtype == np.int64 and np.all(np.diff(part) == 1)
    assert train[-1] < val[0] and val[-1] < test[0] and test[-1] == n - 1 and train[0] == 0
    assert not touched_rows(train, window, horizon) & touched_rows(val, window, horizon)
    assert not touched_rows(val, window, horizon) & touched_rows(test, window, horizon)
    # Exactly window + horizon - 1 samples are dropped at each boundary: one fewer would overlap.
    assert val[0] - train[-1] == window + horizon == test[0] - val[-1]
    other_seed = split_indices(parsed, val_fraction=0.15, test_fraction=0.15, seed=9)
    assert all(np.array_equal(a, b) for a, b in zip((train, val, test), other_seed, strict=True))


def test_a_time_ordered_dataset_without_windows_splits_into_adjacent_blocks():
    parsed = ParsedDataset(np.zeros((20, 1), np.float32), np.zeros(20, np.float32), ["a"], "regression", [],
                           time_ordered=True)  # fmt: skip
    train, val, test = split_indices(parsed, val_fraction=0.2, test_fraction=0.1, seed=0)
    assert train.tolist() == list(range(14)) and val.tolist() == list(range(14, 18)) and test.tolist() == [18, 19]


def test_a_time_ordered_split_refuses_a_series_too_short_for_the_gaps():
    parsed = parse_time_series_csv(series_csv(20), target_column="temp", window=5, horizon=2)
    # 14 windows: 2 for validation, 2 for test and 2 × 6 dropped leave none for training.
    rejects(["The series gives 14 windows", "time-ordered split", "no time step is in two parts", "at least 19"],
            split_indices, parsed, val_fraction=0.15, test_fraction=0.15, seed=0)  # fmt: skip
