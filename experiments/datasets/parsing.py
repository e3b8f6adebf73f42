"""The .npz entry point: checks the arrays' headers and labels, then hands x to the reader of its kind; the
readers never import it."""

from __future__ import annotations

import math
from typing import BinaryIO

import numpy as np

from experiments.datasets.arrays import blocks
from experiments.datasets.core import (
    DEFAULT_LIMITS,
    DatasetError,
    DatasetLimits,
    LabelColumn,
    ParsedDataset,
    binary_file,
    check_bytes,
    check_rows,
    check_task,
    encode_target,
    rows_text,
)
from experiments.datasets.image_reader import image_array
from experiments.datasets.npz_archive import NpzArchive
from experiments.datasets.sequence_reader import sequence_array
from experiments.datasets.tabular_reader import float32_rows


def parse_npz(
    data: bytes | BinaryIO,
    *,
    task: str = "auto",
    kind: str = "auto",
    image_size: tuple[int, int] | None = None,
    limits: DatasetLimits = DEFAULT_LIMITS,
    labelled: bool = True,
) -> ParsedDataset:
    """Arrays x and y from numpy.savez, their kind read from x's shape, everything the headers tell checked before any
    array is unpacked."""
    check_task(task)
    if kind not in ("auto", "tabular", "image", "sequence"):
        raise DatasetError(f"Unknown kind {kind!r} for an .npz file; use auto, tabular, image or sequence.")
    file = binary_file(data)
    if _is_empty(file):
        raise DatasetError("The file is empty.")
    with NpzArchive(file) as archive:
        absent = [key for key in ("x", "y")[:2 if labelled else 1] if key not in archive.keys]
        if absent:
            found = ", ".join(archive.keys) if archive.keys else "no arrays at all"
            raise DatasetError(
                f"The .npz file has no array named {absent[0]!r}; it contains {found}. "
                + ("Name the inputs x and the labels y." if labelled else "Name the inputs x.")
            )
        x_header, y_header = archive.header("x"), archive.header("y") if labelled else None
        check_bytes(x_header.nbytes + (y_header.nbytes if labelled else 0), limits, "The arrays, once unpacked,")
        kind = _check_npz_shapes(x_header, y_header, kind, limits)
        if labelled:
            y_encoded, task, classes = _npz_labels(archive.unpack(y_header), task, limits)
        else:
            y_encoded, classes = np.empty(0, dtype=np.int64), []
        x = archive.unpack(x_header)

    if kind == "image":
        images, details = image_array(x, image_size=image_size, limits=limits)
        return ParsedDataset(images, y_encoded, [], task, classes, "y", kind="image", details=details)
    if kind == "sequence":
        sequences, details = sequence_array(x, limits=limits)
        names = [f"f{i}" for i in range(sequences.shape[2])]
        return ParsedDataset(sequences, y_encoded, names, task, classes, "y", kind="sequence", details=details)
    if x.ndim == 1:
        x = x.reshape(-1, 1)  # one feature per row
    feature_names = [f"f{i}" for i in range(math.prod(x.shape[1:]))]
    return ParsedDataset(float32_rows(x, limits), y_encoded, feature_names, task, classes, "y")


def _is_empty(file: BinaryIO) -> bool:
    file.seek(0)
    empty = not file.read(1)
    file.seek(0)
    return empty


def _check_npz_shapes(x, y, kind: str, limits: DatasetLimits) -> str:
    """The kind x is read as, after checking x's and y's declared types and shapes."""
    if x.ndim == 0:
        raise DatasetError("x must have one row per sample, but it is a single number.")
    if x.dtype.kind not in "biuf":
        raise DatasetError(f"x must contain numbers, but its type is {x.dtype}.")
    kind = _npz_kind(x, kind)
    if y is None:  # inputs without labels
        if x.shape[0] == 0:
            raise DatasetError("The array x is empty: it has no rows.")
        check_rows(x.shape[0], limits, "x")
        return kind
    if not (y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1)):
        raise DatasetError(
            f"y must have one label per row, shape (n,) or (n, 1), but its shape is {y.shape}. "
            "If y is one-hot encoded, save the class index instead (y.argmax(axis=1))."
        )
    if x.shape[0] != y.shape[0]:
        raise DatasetError(f"x has {x.shape[0]} rows but y has {y.shape[0]}; they must match.")
    if x.shape[0] == 0:
        raise DatasetError("The arrays are empty: x and y have no rows.")
    check_rows(x.shape[0], limits, "x")
    if y.dtype.kind not in "biufUS":
        raise DatasetError(f"y must contain numbers or strings, but its type is {y.dtype}.")
    return kind


def _npz_labels(y: np.ndarray, task: str, limits: DatasetLimits) -> tuple[np.ndarray, str, list[str]]:
    y = y.reshape(len(y))
    if y.dtype.kind in "US":
        labels = LabelColumn(limits.max_classes)
        start = 0
        for block in blocks(y):
            cells = [(v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)).strip() for v in block.tolist()]
            labels.add(cells, range(start, start + len(cells)))
            start += len(cells)
        unlabeled = labels.missing.count
    else:
        numbers = np.concatenate([block.astype(np.float64) for block in blocks(y)])
        unlabeled = int((~np.isfinite(numbers)).sum())
        labels = LabelColumn.of_numbers(numbers)
    if unlabeled:
        raise DatasetError(
            f"{rows_text(unlabeled).capitalize()} {'has' if unlabeled == 1 else 'have'} "
            "a missing (NaN or empty) label in y. Remove those rows or fill them in."
        )
    return encode_target(labels, task, subject="y", locate=lambda i: f"y[{i}]", limits=limits)


def _npz_kind(x, kind: str) -> str:
    """The kind x is read as; a forced kind must fit x's shape (tabular takes any shape)."""
    shape = "×".join(str(d) for d in x.shape)
    if kind == "auto":
        if x.ndim == 4 or (x.ndim == 3 and x.dtype == np.uint8):
            return "image"
        return "sequence" if x.ndim == 3 else "tabular"
    if kind == "image" and x.ndim not in (3, 4):
        raise DatasetError(
            "Images need x of shape (n, height, width) or (n, height, width, channels), "
            f"but x is {shape}. Choose another kind or save the images in that shape."
        )
    if kind == "sequence" and x.ndim not in (2, 3):
        raise DatasetError(
            f"Sequences need x of shape (n, steps) or (n, steps, features), but x is {shape}. "
            "Choose another kind or save the sequences in that shape."
        )
    return kind
