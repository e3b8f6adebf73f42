"""A model's raw outputs as a person downloads them (a label and one probability column per class, or values), pure
NumPy and csv so the worker's file and the page's preview agree."""

import csv
from typing import TextIO

import numpy as np

from experiments.presentation.csv_export import safe_cell

PREVIEW_ROWS = 10
_BLOCK_ROWS = 4096


def class_probabilities(outputs: np.ndarray, n_classes: int) -> np.ndarray:
    """(n, n_classes) probabilities; a binary model with one sigmoid output gives P(class 1)."""
    outputs = outputs.reshape(len(outputs), -1)
    if outputs.shape[1] == 1 and n_classes == 2:
        return np.concatenate([1.0 - outputs, outputs], axis=1)
    return outputs


def predicted_labels(outputs: np.ndarray, n_classes: int) -> np.ndarray:
    return class_probabilities(outputs, n_classes).argmax(axis=1)


def _columns(task: str, classes: list[str], width: int, names: list[str]) -> list[str]:
    head = ["row"] + (["file"] if names else [])
    if task == "classification":
        return [*head, "label", *classes]
    return [*head, "prediction"] if width == 1 else [*head, *(f"prediction_{i}" for i in range(width))]


def prediction_rows(outputs: np.ndarray, *, task: str, classes: list[str], names: list[str], start: int = 0,
                    stop: int | None = None):
    """The header, then rows start..stop (0-based) of the table."""
    values = class_probabilities(outputs, len(classes)) if task == "classification" else (
        outputs.reshape(len(outputs), -1))
    stop = len(values) if stop is None else min(stop, len(values))
    yield _columns(task, classes, values.shape[1], names)
    for block in range(start, stop, _BLOCK_ROWS):
        part = values[block:min(stop, block + _BLOCK_ROWS)].astype(np.float32)
        # NumPy writes each float32 as the shortest text that reads back as the same number,
        # a block at a time (str() of each value would be ten times slower).
        texts = part.astype(str).tolist()
        labels = [classes[i] for i in part.argmax(axis=1)] if task == "classification" else None
        for offset, cells in enumerate(texts):
            i = block + offset
            head = [str(i + 1)] + ([names[i]] if names else [])
            yield [*head, *([labels[offset]] if labels is not None else []), *cells]


def prediction_preview(outputs: np.ndarray, *, task: str, classes: list[str], names: list[str]) -> list[dict]:
    """The first rows as {column: text}, for the pages."""
    rows = prediction_rows(outputs, task=task, classes=classes, names=names, stop=PREVIEW_ROWS)
    header = next(rows)
    return [dict(zip(header, row, strict=True)) for row in rows]


def preview_columns(row: dict, *, task: str, classes: list[str]) -> list[tuple[str, bool]]:
    """A stored preview row's columns in the CSV's order, each with whether it holds a number (a
    probability or a predicted value). The order is rebuilt, not read from the row: PostgreSQL
    keeps a JSON object's keys sorted by length (the digits' classes "0".."9" came before "row")."""
    keys = set(row)
    if task == "classification":
        texts = ["row", *(["file"] if "file" not in classes else []), "label"]
        numbers = [name for name in classes if name in keys]
    else:
        texts = ["row", "file"]
        numbers = sorted((k for k in keys if k.startswith("prediction")), key=lambda k: (len(k), k))
    columns = [(name, False) for name in texts if name in keys] + [(name, True) for name in numbers]
    known = {name for name, _ in columns}
    return columns + [(name, False) for name in row if name not in known]  # never expected: shown as text


def probability_text(value: float) -> str:
    """A probability as pages show it: 4 decimals, and never a rounded 0 or 1 that is not one
    ("<0.0001", ">0.9999"); the CSV keeps every digit."""
    if 0 < value < 0.00005:
        return "<0.0001"
    if 0.99995 <= value < 1:
        return ">0.9999"
    return f"{value:.4f}"


def write_prediction_csv(file: TextIO, outputs: np.ndarray, *, task: str, classes: list[str],
                         names: list[str]) -> None:
    """The table as CSV a spreadsheet opens safely: the cells users wrote (class names in the
    header and the label column, the images' file names) go through csv_export.safe_cell; the
    numbers, negative ones included, are written as they are."""
    rows = prediction_rows(outputs, task=task, classes=classes, names=names)
    header = next(rows)
    texts = sum(1 for column in header[:3] if column in ("file", "label"))
    writer = csv.writer(file)
    writer.writerow([safe_cell(column) for column in header])
    writer.writerows([row[0], *map(safe_cell, row[1:1 + texts]), *row[1 + texts:]] for row in rows)
