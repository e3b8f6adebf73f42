"""Text classification or regression from a CSV read like a tabular one, the texts kept as a NumPy unicode array
so workers load them without pickle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

from experiments.datasets.arrays import ArrayWriter
from experiments.datasets.core import (
    DEFAULT_LIMITS,
    DatasetError,
    DatasetLimits,
    LabelColumn,
    Occurrences,
    ParsedDataset,
    check_bytes,
    check_rows,
    check_task,
    first_few,
    rows_text,
)
from experiments.datasets.csv_table import Batch, CsvTable, csv_target, missing_column_message

# A unicode array stores every text at the length of the longest, 4 bytes a character.
_MAX_ARRAY_BYTES = 1024 * 1024 * 1024


def parse_text_csv(
    data: bytes | BinaryIO,
    *,
    text_column: str,
    target_column: str | None,
    task: str = "auto",
    limits: DatasetLimits = DEFAULT_LIMITS,
) -> ParsedDataset:
    """Texts and targets from a CSV read like a tabular one (unlabelled: texts alone), in two passes so the texts are
    stored at the longest one's width."""
    check_task(task)
    table = CsvTable(data)
    header = table.header
    text_column = text_column.strip()
    if target_column is None and text_column not in header and len(header) == 1:
        text_column = header[0]  # the texts typed under a header of their own
    target_column = target_column.strip() if target_column is not None else None
    if text_column == target_column:
        raise DatasetError(
            f"The text column and the target column are both {text_column!r}; "
            "choose the column holding the text and a different column to predict."
        )
    for column in (text_column, target_column):
        if column is not None and column not in header:
            raise DatasetError(missing_column_message(column, header))
    text_at = header.index(text_column)

    labels, empty = LabelColumn(limits.max_classes), Occurrences()
    n, longest, longest_line, words, most_words = 0, 0, 0, 0, 0
    for rows, lines in _quoting_hint(table.batches()):
        n += len(rows)
        check_rows(n, limits)
        for row, line in zip(rows, lines, strict=True):
            text = row[text_at]
            # Only truly empty cells count as missing: "None" or "NA" can be what someone wrote.
            if not text:
                empty.add(line)
            if len(text) > longest:
                longest, longest_line = len(text), line
            count = len(text.split())
            words, most_words = words + count, max(most_words, count)
        if target_column is not None:
            labels.add([row[header.index(target_column)] for row in rows], lines)
    if empty.count == n:
        raise DatasetError(
            f"The text column {text_column!r} is empty in every row. Choose the column that holds the text."
        )
    if empty.count:
        raise DatasetError(
            f"{rows_text(empty.count).capitalize()} {'has' if empty.count == 1 else 'have'} no text in the "
            f"column {text_column!r} (row{'s' if empty.count > 1 else ''} {first_few(empty.first)}). "
            "Fill them in or remove those rows."
        )
    if target_column is None:
        y, task, classes = np.empty(0, dtype=np.int64), task, []
    else:
        y, task, classes = csv_target(labels, target_column, task, limits)

    nbytes = n * longest * 4
    if nbytes > _MAX_ARRAY_BYTES:
        raise DatasetError(
            f"The texts are too long to store together: every text is kept at the length of the "
            f"longest (row {longest_line}, {longest:,} characters), which for "
            f"{n:,} texts takes {nbytes / _MAX_ARRAY_BYTES:.1f} GB; the limit is 1 GB. "
            "Shorten the longest texts or upload fewer rows."
        )
    check_bytes(nbytes, limits, "The texts")
    with ArrayWriter(f"<U{max(1, longest)}", ()) as writer:
        for rows, _ in table.batches():
            writer.write(np.asarray([row[text_at] for row in rows], dtype=writer.dtype))
        x = writer.finish()
    details = text_details(text_column, words=words, most_words=most_words, n=n)
    details["ignored_columns"] = [name for name in header if name not in (text_column, target_column)]
    return ParsedDataset(x, y, [text_column], task, classes, target_column, kind="text", details=details)


def _quoting_hint(batches: Iterator[Batch]) -> Iterator[Batch]:
    """The batches, with a hint about quoting when a row has too many values: the usual cause
    in a text file is an unquoted comma inside a text."""
    try:
        yield from batches
    except DatasetError as exc:
        if "values, but the header has" not in str(exc):
            raise
        raise DatasetError(
            f"{exc} A text that contains the delimiter (a comma, say) must be in double quotes, "
            'as in "Good, but pricey",positive.'
        ) from None


def text_details(text_column: str, *, words: int, most_words: int, n: int) -> dict:
    """What the dataset page says about a text dataset: its column and text lengths in words."""
    return {
        "text_column": text_column,
        "mean_words": round(words / n, 2) if n else 0.0,
        "max_words": most_words,
    }
