"""Sequences as float32 arrays (n, timesteps, features): from an .npz of independent
sequences, or as sliding windows over one time series in a CSV.

A time-series CSV holds one series, a row per time step in file order. Sample i is the window
of rows [i, i + window) of every numeric column (the target's own past values included), and
its label is the target `horizon` rows after the window ends, at row i + window + horizon - 1.
Neighbouring windows share rows, so such a dataset is time_ordered: split_indices cuts it into
blocks in time order with a gap between them instead of shuffling.
"""

from __future__ import annotations

import numbers

import numpy as np

from experiments.dataset_parsing import (
    DatasetError,
    ParsedDataset,
    _as_number,
    _check_task,
    _csv_target,
    _decode_text,
    _features,
    _is_missing,
    _missing_column_message,
    _read_csv,
    _rows,
)

_MIN_WINDOWS = 10  # fewer cannot fill training, validation and test blocks with a gap between
_MAX_ARRAY_BYTES = 2 * 1024 * 1024 * 1024


def parse_time_series_csv(
    data: bytes, *, target_column: str, window: int, horizon: int = 1, task: str = "regression"
) -> ParsedDataset:
    """Windows of window rows × every numeric column, each labelled with the target horizon rows
    after it (horizon 1: the next row). Columns without any number (dates, notes) are ignored
    and listed in details["ignored_columns"]."""
    _check_task(task)
    for name, value in (("window", window), ("horizon", horizon)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise DatasetError(f"The {name} must be a whole number of time steps, at least 1; got {value!r}.")
    window, horizon = int(window), int(horizon)
    header, body, lines = _read_csv(_decode_text(data))
    target_column = target_column.strip()
    if target_column not in header:
        raise DatasetError(_missing_column_message(target_column, header))
    n_rows = len(body)
    if window + horizon > n_rows:
        raise DatasetError(
            f"The window ({window}) plus the horizon ({horizon}) is longer than the series "
            f"({_rows(n_rows)}). Use a smaller window or horizon, or a longer series."
        )
    n_windows = n_rows - window - horizon + 1
    if n_windows < _MIN_WINDOWS:
        raise DatasetError(
            f"The series of {_rows(n_rows)} gives only {n_windows} window{'s' if n_windows > 1 else ''} "
            f"of {window} rows with a horizon of {horizon}; at least {_MIN_WINDOWS} are needed to "
            "train, validate and test. Use a smaller window or horizon, or a longer series."
        )

    columns = dict(zip(header, zip(*body, strict=True), strict=True))
    numeric = {name: _has_numbers(cells) for name, cells in columns.items()}
    # A target of words (classification) is a label only; other columns of words are ignored.
    ignored = [name for name in header if not numeric[name] and name != target_column]
    features = {name: cells for name, cells in columns.items() if numeric[name]}
    if not features:
        raise DatasetError(
            "No column holds numbers, so there is nothing to learn from. A time series needs "
            "numeric columns, one row per time step."
        )
    values, missing = _features(features, lines)  # refuses a column mixing numbers and words
    if missing:
        raise DatasetError(
            "Some values are missing: "
            + "; ".join(
                f"column {name!r} in {_rows(len(at))} (first row {at[0]})" for name, at in missing.items()
            )
            + ". Fill them in, for example with the previous value: removing rows would join "
            "moments that are not next to each other."
        )
    values = values.astype(np.float32)
    if not np.isfinite(values).all():
        row, column = np.argwhere(~np.isfinite(values))[0]
        raise DatasetError(
            f"Column {list(features)[column]!r} has a number too large for 32-bit floats in row "
            f"{lines[row]}. Rescale that column."
        )

    first_label = window + horizon - 1
    y, task, classes = _csv_target(columns[target_column][first_label:], lines[first_label:], target_column, task)

    n_features = values.shape[1]
    nbytes = n_windows * window * n_features * 4
    if nbytes > _MAX_ARRAY_BYTES:
        raise DatasetError(
            f"The {n_windows:,} windows of {window} × {n_features} values would take "
            f"{nbytes / 1024**3:.1f} GB; the limit is 2 GB. Use a smaller window or fewer columns."
        )
    # sliding_window_view gives (windows, features, steps) views; one copy makes them real rows.
    x = np.lib.stride_tricks.sliding_window_view(values, window, axis=0)[:n_windows]
    x = np.ascontiguousarray(x.transpose(0, 2, 1))
    details = {
        "timesteps": window,
        "features": n_features,
        "source_format": "csv",
        "window": window,
        "horizon": horizon,
        "target_column": target_column,
        "ignored_columns": ignored,
    }
    return ParsedDataset(
        x, y, list(features), task, classes, target_column, kind="sequence", details=details, time_ordered=True
    )


def _has_numbers(cells: tuple[str, ...]) -> bool:
    try:  # fast path for a clean numeric column
        np.asarray(cells, dtype=np.float64)
        return True
    except ValueError:
        return any(_as_number(cell) is not None for cell in cells if not _is_missing(cell))


def sequence_array(x: np.ndarray) -> tuple[np.ndarray, dict]:
    """Numeric x of shape (n, steps) or (n, steps, features) as float32 (n, steps, features),
    and the details for the dataset page; refuses missing or infinite values."""
    if x.ndim == 2:
        x = x[..., np.newaxis]  # one feature per step
    n, steps, n_features = (int(d) for d in x.shape)
    if steps == 0 or n_features == 0:
        raise DatasetError(f"The sequences are empty: x has shape {x.shape}.")
    sequences = x.astype(np.float32)
    bad = ~np.isfinite(sequences)
    if bad.any():
        count = int(bad.sum())
        in_samples = bad.reshape(n, -1).any(axis=1)
        raise DatasetError(
            f"x has {count:,} missing (NaN) or infinite value{'s' if count > 1 else ''}, or numbers too "
            f"large for 32-bit floats, in {int(in_samples.sum()):,} sequence"
            f"{'s' if in_samples.sum() > 1 else ''} (the first is x[{int(np.argmax(in_samples))}]). "
            "Fill them in or remove those sequences."
        )
    return sequences, {"timesteps": steps, "features": n_features, "source_format": "npz"}
