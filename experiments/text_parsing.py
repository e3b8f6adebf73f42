"""Text classification or regression from a CSV: one column of text, one target column.

The CSV is read exactly like a tabular one (encoding, delimiter, header, missing labels, how the
target becomes classes); only the text column is kept as input. Texts are stored as a NumPy
unicode array, which numpy.savez writes without pickle, so workers load them safely.
"""

from __future__ import annotations

import numpy as np

from experiments.dataset_parsing import (
    DatasetError,
    ParsedDataset,
    _check_task,
    _csv_target,
    _decode_text,
    _first_few,
    _missing_column_message,
    _read_csv,
    _rows,
)

# A unicode array stores every text at the length of the longest, 4 bytes a character.
_MAX_ARRAY_BYTES = 1024 * 1024 * 1024


def parse_text_csv(data: bytes, *, text_column: str, target_column: str, task: str = "auto") -> ParsedDataset:
    """x holds the text column (stripped of surrounding spaces), y the target as in parse_csv;
    other columns are ignored and listed in details["ignored_columns"]."""
    _check_task(task)
    try:
        header, body, lines = _read_csv(_decode_text(data))
    except DatasetError as exc:
        if "values, but the header has" not in str(exc):
            raise
        # The usual cause in a text file: an unquoted comma inside a text.
        raise DatasetError(
            f"{exc} A text that contains the delimiter (a comma, say) must be in double quotes, "
            'as in "Good, but pricey",positive.'
        ) from None
    text_column, target_column = text_column.strip(), target_column.strip()
    if text_column == target_column:
        raise DatasetError(
            f"The text column and the target column are both {text_column!r}; "
            "choose the column holding the text and a different column to predict."
        )
    for column in (text_column, target_column):
        if column not in header:
            raise DatasetError(_missing_column_message(column, header))

    texts = [row[header.index(text_column)] for row in body]
    # Only truly empty cells count as missing: "None" or "NA" can be what someone wrote.
    empty = [line for text, line in zip(texts, lines, strict=True) if not text]
    if len(empty) == len(texts):
        raise DatasetError(
            f"The text column {text_column!r} is empty in every row. Choose the column that holds the text."
        )
    if empty:
        raise DatasetError(
            f"{_rows(len(empty)).capitalize()} {'has' if len(empty) == 1 else 'have'} no text in the "
            f"column {text_column!r} (row{'s' if len(empty) > 1 else ''} {_first_few(empty)}). "
            "Fill them in or remove those rows."
        )
    y, task, classes = _csv_target([row[header.index(target_column)] for row in body], lines, target_column, task)

    longest = max(range(len(texts)), key=lambda i: len(texts[i]))
    nbytes = len(texts) * len(texts[longest]) * 4
    if nbytes > _MAX_ARRAY_BYTES:
        raise DatasetError(
            f"The texts are too long to store together: every text is kept at the length of the "
            f"longest (row {lines[longest]}, {len(texts[longest]):,} characters), which for "
            f"{len(texts):,} texts takes {nbytes / _MAX_ARRAY_BYTES:.1f} GB; the limit is 1 GB. "
            "Shorten the longest texts or upload fewer rows."
        )
    x = np.asarray(texts, dtype=str)
    details = text_details(x, text_column)
    details["ignored_columns"] = [name for name in header if name not in (text_column, target_column)]
    return ParsedDataset(x, y, [text_column], task, classes, target_column, kind="text", details=details)


def text_details(texts: np.ndarray, text_column: str) -> dict:
    """What the dataset page says about a text dataset: its column and text lengths in words."""
    words = [len(str(text).split()) for text in texts]
    return {
        "text_column": text_column,
        "mean_words": round(sum(words) / len(words), 2) if words else 0.0,
        "max_words": max(words, default=0),
    }
