"""Tabular data: a CSV of numeric feature columns and a target column, or the x of an .npz
that parsing reads as rows of numbers; x is float32 (n_rows, *input_shape)."""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

from experiments.datasets.arrays import ArrayWriter, converted
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
)
from experiments.datasets.csv_table import CsvTable, NumericColumns, csv_target, missing_column_message


def parse_csv(
    data: bytes | BinaryIO, *, target_column: str, task: str = "auto", limits: DatasetLimits = DEFAULT_LIMITS
) -> ParsedDataset:
    check_task(task)
    table = CsvTable(data)
    header = table.header
    target_column = target_column.strip()
    if target_column not in header:
        raise DatasetError(missing_column_message(target_column, header))
    if len(header) == 1:
        raise DatasetError(
            f"The file has only the target column {target_column!r}; "
            "there are no feature columns to learn from."
        )

    features = [name for name in header if name != target_column]
    target_at = header.index(target_column)
    labels = LabelColumn(limits.max_classes)
    x = _feature_rows(table, features, limits, each_batch=lambda columns, lines: labels.add(columns[target_at], lines))
    y, task, classes = csv_target(labels, target_column, task, limits)
    return ParsedDataset(x, y, features, task, classes, target_column)


def parse_csv_inputs(data: bytes | BinaryIO, *, features: list[str], limits: DatasetLimits = DEFAULT_LIMITS
                     ) -> np.ndarray:
    """Rows without labels for a model trained on `features`: the header must name exactly those
    columns (in any order); x comes in the order of `features`, checked as parse_csv checks it."""
    table = CsvTable(data)
    missing = [name for name in features if name not in table.header]
    extra = [name for name in table.header if name not in features]
    if missing or extra:
        parts = ([f"missing {', '.join(map(repr, missing))}"] if missing else []) + (
            [f"not used by the model: {', '.join(map(repr, extra))}"] if extra else [])
        raise DatasetError(f"The columns must be the model's features ({', '.join(features)}); "
                           f"{'; '.join(parts)}.")
    return _feature_rows(table, features, limits)


def _feature_rows(table: CsvTable, features: list[str], limits: DatasetLimits, each_batch=None) -> np.ndarray:
    """The feature columns as float32 rows on disk, a batch at a time; `each_batch(columns, lines)`
    sees every batch's columns (the target's reader takes its labels there)."""
    header = table.header
    feature_at = [header.index(name) for name in features]
    numbers, too_large = NumericColumns(features), NonFinite()
    with ArrayWriter(np.float32, (len(features),)) as writer:
        for rows, lines in table.batches():
            check_rows(writer.n_rows + len(rows), limits)
            check_bytes((writer.n_rows + len(rows)) * len(features) * 4, limits, "The inputs as 32-bit floats")
            columns = list(zip(*rows, strict=True))
            values = numbers.add([columns[j] for j in feature_at], lines)
            if each_batch is not None:
                each_batch(columns, lines)
            x = values.astype(np.float32)
            # Numbers fine as float64 may overflow float32; missing cells are refused below.
            too_large.add(np.isfinite(values).all(axis=1) & ~np.isfinite(x).all(axis=1), writer.n_rows)
            writer.write(x)
        numbers.check(features, missing_advice="Fill them in or remove those rows.")
        too_large.refuse_rows()
        return writer.finish()


def float32_rows(x: np.ndarray, limits: DatasetLimits = DEFAULT_LIMITS) -> np.ndarray:
    """x as float32 on disk; refuses rows that are not all finite numbers (NaN, infinity, or
    too large for 32-bit floats)."""
    check_bytes(x.size * 4, limits, "The inputs as 32-bit floats")
    bad = NonFinite()
    rows = converted(x, np.float32, check=lambda block, start: bad.add(~np.isfinite(block), start))
    bad.refuse_rows()
    return rows
