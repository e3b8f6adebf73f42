"""Sequences as float32 arrays (n, timesteps, features): from an .npz, or as sliding windows over one time series
in a CSV, split in time order since windows share rows."""

from __future__ import annotations

import numbers
from typing import BinaryIO

import numpy as np

from experiments.datasets.arrays import ArrayWriter, converted, release, rows_per_block
from experiments.datasets.core import (
    DEFAULT_LIMITS,
    DatasetError,
    DatasetLimits,
    LabelColumn,
    NonFinite,
    ParsedDataset,
    check_bytes,
    check_rows,
    check_task,
    rows_text,
)
from experiments.datasets.csv_table import CsvTable, NumericColumns, csv_target, missing_column_message

_MIN_WINDOWS = 10  # fewer cannot fill training, validation and test blocks with a gap between
_MAX_ARRAY_BYTES = 2 * 1024 * 1024 * 1024


def parse_time_series_csv(
    data: bytes | BinaryIO,
    *,
    target_column: str,
    window: int,
    horizon: int = 1,
    task: str = "regression",
    limits: DatasetLimits = DEFAULT_LIMITS,
) -> ParsedDataset:
    """Sliding windows over a time-series CSV, each labelled with the target `horizon` rows after it, read once a batch
    of rows at a time."""
    check_task(task)
    for name, value in (("window", window), ("horizon", horizon)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise DatasetError(f"The {name} must be a whole number of time steps, at least 1; got {value!r}.")
    window, horizon = int(window), int(horizon)
    table = CsvTable(data)
    header = table.header
    target_column = target_column.strip()
    if target_column not in header:
        raise DatasetError(missing_column_message(target_column, header))

    first_label = window + horizon - 1
    columns, labels = NumericColumns(header), LabelColumn(limits.max_classes)
    target_at = header.index(target_column)
    too_large: dict[str, int] = {}  # column -> first line with a number too large for float32
    with ArrayWriter(np.float32, (len(header),)) as writer:
        for rows, lines in table.batches():
            check_rows(writer.n_rows + len(rows), limits)
            cells = list(zip(*rows, strict=True))
            values = columns.add(cells, lines)
            as_float32 = values.astype(np.float32)
            for j, line in _first_overflows(values, as_float32, lines):
                too_large.setdefault(header[j], line)
            skip = max(0, first_label - writer.n_rows)  # rows before the first label only feed windows
            labels.add(cells[target_at][skip:], lines[skip:])
            writer.write(as_float32)
        n_rows = writer.n_rows
        series = writer.finish()

    if window + horizon > n_rows:
        raise DatasetError(
            f"The window ({window}) plus the horizon ({horizon}) is longer than the series "
            f"({rows_text(n_rows)}). Use a smaller window or horizon, or a longer series."
        )
    n_windows = n_rows - window - horizon + 1
    if n_windows < _MIN_WINDOWS:
        raise DatasetError(
            f"The series of {rows_text(n_rows)} gives only {n_windows} window{'s' if n_windows > 1 else ''} "
            f"of {window} rows with a horizon of {horizon}; at least {_MIN_WINDOWS} are needed to "
            "train, validate and test. Use a smaller window or horizon, or a longer series."
        )
    # A target of words (classification) is a label only; other columns of words are ignored.
    numeric = [name for j, name in enumerate(header) if columns.has_number[j]]
    ignored = [name for name in header if name not in numeric and name != target_column]
    if not numeric:
        raise DatasetError(
            "No column holds numbers, so there is nothing to learn from. A time series needs "
            "numeric columns, one row per time step."
        )
    columns.check(  # refuses a column mixing numbers and words
        numeric, subject="values",
        missing_advice="Fill them in, for example with the previous value: removing rows would join "
        "moments that are not next to each other.",
    )
    overflowing = [(line, numeric.index(name), name) for name, line in too_large.items() if name in numeric]
    if overflowing:
        line, _, name = min(overflowing)
        raise DatasetError(
            f"Column {name!r} has a number too large for 32-bit floats in row {line}. Rescale that column."
        )
    y, task, classes = csv_target(labels, target_column, task, limits)

    n_features = len(numeric)
    nbytes = n_windows * window * n_features * 4
    if nbytes > _MAX_ARRAY_BYTES:
        raise DatasetError(
            f"The {n_windows:,} windows of {window} × {n_features} values would take "
            f"{nbytes / 1024**3:.1f} GB; the limit is 2 GB. Use a smaller window or fewer columns."
        )
    check_bytes(nbytes, limits, "The windows")
    x = _windows(series, [header.index(name) for name in numeric], window, n_windows)
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
        x, y, numeric, task, classes, target_column, kind="sequence", details=details, time_ordered=True
    )


def _first_overflows(values: np.ndarray, as_float32: np.ndarray, lines: list[int]):
    """(column, line) of the first cell per column that is a number but too large for float32."""
    overflow = np.isfinite(values) & ~np.isfinite(as_float32)
    for j in np.flatnonzero(overflow.any(axis=0)):
        yield int(j), lines[int(np.argmax(overflow[:, j]))]


def _windows(series: np.ndarray, columns: list[int], window: int, n_windows: int) -> np.ndarray:
    """Sample i is rows [i, i + window) of the chosen columns: (n_windows, window, features)."""
    per_block = max(1, rows_per_block(series) * 4 // window)  # about 16 MB of windows a block
    with ArrayWriter(np.float32, (window, len(columns))) as writer:
        for start in range(0, n_windows, per_block):
            stop = min(n_windows, start + per_block)
            rows = np.array(series[start : stop + window - 1][:, columns])
            release(series)
            # sliding_window_view gives (windows, features, steps) views; one copy makes them real rows.
            views = np.lib.stride_tricks.sliding_window_view(rows, window, axis=0)
            writer.write(views.transpose(0, 2, 1))
        return writer.finish()


def sequence_array(x: np.ndarray, *, limits: DatasetLimits = DEFAULT_LIMITS) -> tuple[np.ndarray, dict]:
    """Numeric x of shape (n, steps) or (n, steps, features) as float32 (n, steps, features),
    and the details for the dataset page; refuses missing or infinite values."""
    if x.ndim == 2:
        x = x[..., np.newaxis]  # one feature per step
    n, steps, n_features = (int(d) for d in x.shape)
    if steps == 0 or n_features == 0:
        raise DatasetError(f"The sequences are empty: x has shape {x.shape}.")
    check_bytes(x.size * 4, limits, "The sequences as 32-bit floats")
    bad = NonFinite()
    sequences = converted(x, np.float32, check=lambda block, start: bad.add(~np.isfinite(block), start))
    if bad.values:
        raise DatasetError(
            f"x has {bad.values:,} missing (NaN) or infinite value{'s' if bad.values > 1 else ''}, or numbers "
            f"too large for 32-bit floats, in {bad.rows:,} sequence{'s' if bad.rows > 1 else ''} "
            f"(the first is x[{bad.first}]). Fill them in or remove those sequences."
        )
    return sequences, {"timesteps": steps, "features": n_features, "source_format": "npz"}
