"""What every dataset reader builds on (errors, limits, the parsed-dataset type, shared helpers), pure so the web
and a worker parse the same bytes alike (docs/design/datasets-and-models.md)."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from experiments.errors import TuneboardError

TASKS = ("auto", "classification", "regression")
KINDS = ("tabular", "image", "text", "sequence")
MB = 1024 * 1024
GB = 1024 * MB
# Spellings people and spreadsheet exports use for "no value".
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})
# "auto" reads integer targets as class labels only up to this many distinct values.
_MAX_AUTO_CLASSES = 50
_NO_LABEL = object()  # a target cell spelt as missing


class DatasetError(TuneboardError, ValueError):
    """A problem with the user's data; str(exc) is the message shown to them."""


@dataclass(frozen=True)
class DatasetLimits:
    """What one upload may become (bytes, rows, classes), read from the settings: the arrays stay on disk, so rows
    bound the web's memory and bytes the disk's."""

    max_bytes: int = 2 * GB
    max_rows: int = 1_000_000
    max_classes: int = 1_000


DEFAULT_LIMITS = DatasetLimits()


@dataclass
class ParsedDataset:
    """Validated arrays (x's dtype and shape set by the kind) plus what the dataset page shows about them."""

    x: np.ndarray
    y: np.ndarray  # int64 class indices for classification, float32 for regression
    feature_names: list[str]  # image: []; text: [text column]; sequence: one per feature
    task: str  # "classification" | "regression"
    classes: list[str]  # classes[i] is the name of label i; [] for regression
    target_name: str = "target"
    kind: str = "tabular"  # one of KINDS
    details: dict = field(default_factory=dict)  # JSON-serialisable facts for the dataset page
    # True: rows are consecutive moments of one series, so splits are contiguous blocks in time.
    time_ordered: bool = False

    @property
    def n_rows(self) -> int:
        return int(self.x.shape[0])

    @property
    def input_shape(self) -> list[int]:
        return [int(d) for d in self.x.shape[1:]]

    @property
    def n_features(self) -> int:
        return math.prod(self.input_shape)  # a text dataset has one input: its text

    @property
    def class_counts(self) -> dict[str, int]:
        if self.task != "classification":
            return {}
        counts = np.bincount(self.y, minlength=len(self.classes))
        return {name: int(count) for name, count in zip(self.classes, counts, strict=True)}

    def preview(self, n: int = 10) -> list[dict[str, float | str]]:
        """The first n rows for display: tabular rows list every value; an image or a sequence
        shows its shape (listing every pixel would bury the page) and a text its first 200
        characters. The last key is target_name with the class name or the number."""
        rows: list[dict[str, float | str]] = []
        for i in range(min(n, self.n_rows)):
            row: dict[str, float | str] = {}
            if self.kind == "image":
                row["image"] = "×".join(str(d) for d in self.input_shape)
            elif self.kind == "sequence":
                row["sequence"] = "×".join(str(d) for d in self.input_shape)
            elif self.kind == "text":
                row[self.feature_names[0]] = str(self.x[i])[:200]
            else:
                # str() of a float32 is its shortest repr, so 0.1 shows as 0.1, not 0.10000000149.
                values = self.x[i].reshape(-1)
                for name, value in zip(self.feature_names, values, strict=True):
                    row[name] = float(str(value))
            target = self.y[i]
            is_class = self.task == "classification"
            row[self.target_name] = self.classes[int(target)] if is_class else float(str(target))
            rows.append(row)
        return rows


def check_upload_size(size_bytes: int, limit_mb: int) -> None:
    if size_bytes <= limit_mb * MB:
        return
    shown = f"{size_bytes / MB:.1f}"
    if float(shown) <= limit_mb:  # rounding would hide why 50.01 MB is over a 50 MB limit
        raise DatasetError(
            f"The file is {size_bytes:,} bytes, just over the limit of {limit_mb} MB "
            f"({limit_mb * MB:,} bytes)."
        )
    raise DatasetError(f"The file is {shown} MB; the limit is {limit_mb} MB.")


class NonFinite:
    """Cells that are not finite numbers, counted as blocks of rows go by: how many, in how
    many rows, and the first such row."""

    def __init__(self):
        self.values = 0
        self.rows = 0
        self.first = -1

    def add(self, bad: np.ndarray, start: int) -> None:
        """bad: which cells of the block whose first row is row `start` are not finite."""
        if bad.any():
            rows = bad.reshape(len(bad), -1).any(axis=1)
            if self.first < 0:
                self.first = start + int(np.argmax(rows))
            self.values += int(bad.sum())
            self.rows += int(rows.sum())

    def refuse_rows(self) -> None:
        if self.rows:
            # CSV values are checked per column before this; here it's NaN/inf in an npz or
            # numbers too large for 32-bit floats.
            raise DatasetError(
                "The inputs have missing (NaN) or infinite values, or numbers too large for 32-bit "
                f"floats, in {rows_text(self.rows)} (the first is data row {self.first + 1}). "
                "Fill them in or remove those rows."
            )


def binary_file(data: bytes | BinaryIO) -> BinaryIO:
    """A seekable binary file for bytes, or the file itself (a Django upload is unwrapped to
    the file it spooled to, so nothing reads it whole into memory)."""
    if isinstance(data, bytes | bytearray | memoryview):
        return io.BytesIO(data)
    while not isinstance(data, io.IOBase) and hasattr(data, "file"):
        data = data.file
    return data


def check_rows(n_rows: int, limits: DatasetLimits, what: str = "The file") -> None:
    if n_rows > limits.max_rows:
        raise DatasetError(
            f"{what} has more than {limits.max_rows:,} rows, the most a dataset may have here. "
            "Upload a sample of the rows, or ask your administrator to raise TUNEBOARD_MAX_DATASET_ROWS."
        )


def check_bytes(nbytes: int, limits: DatasetLimits, what: str) -> None:
    if nbytes > limits.max_bytes:
        raise DatasetError(
            f"{what} take {_size(nbytes)}; the limit is {_size(limits.max_bytes)}. Upload fewer rows or "
            "smaller arrays, or ask your administrator to raise TUNEBOARD_MAX_DATASET_MB."
        )


def _size(nbytes: int) -> str:
    return f"{nbytes / GB:.1f} GB" if nbytes >= GB else f"{nbytes / MB:,.1f} MB"


def check_task(task: str) -> None:
    if task not in TASKS:
        raise DatasetError(f"Unknown task {task!r}; use one of: {', '.join(TASKS)}.")


def is_missing(cell: str) -> bool:
    return cell.lower() in _MISSING


def as_number(cell: str) -> float | None:
    try:
        number = float(cell)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


@dataclass
class Occurrences:
    """Where something was found: how often, the first few places and the first value."""

    count: int = 0
    first: list[int] = field(default_factory=list)
    value: str = ""
    _kept = 6  # first_few shows five and an ellipsis when there are more

    def add(self, where: int, value: str = "") -> None:
        if not self.count:
            self.value = value
        if len(self.first) < self._kept:
            self.first.append(where)
        self.count += 1


class LabelColumn:
    """A target read a batch at a time, each cell kept as a number and as an index among the texts seen, so a column of
    words costs 12 bytes a row."""

    def __init__(self, max_classes: int):
        self._numbers: list[np.ndarray] = []
        self._codes: list[np.ndarray] = []
        self._texts: dict[str, int] = {}
        self._values: list[float | None | object] = []  # per text: its number, None (a word) or _NO_LABEL
        self._keep = max_classes + 1
        self.missing = Occurrences()
        self.first_word: tuple[str, int] | None = None  # a label that is not a number, and where

    @classmethod
    def of_numbers(cls, numbers: np.ndarray) -> LabelColumn:
        labels = cls(0)
        labels._numbers = [numbers]
        return labels

    def add(self, cells: Sequence[str], where: Sequence[int]) -> None:
        """cells stripped; where[i] is the line (or index) of cells[i] for messages."""
        codes = np.full(len(cells), -1, dtype=np.int32)
        numbers = np.full(len(cells), np.nan)
        texts, values = self._texts, self._values
        for i, cell in enumerate(cells):
            code = texts.get(cell)
            if code is None:
                value = _NO_LABEL if is_missing(cell) else as_number(cell)
                if len(texts) <= self._keep:
                    code = texts[cell] = len(texts)
                    values.append(value)
            else:
                value = values[code]
            if value is _NO_LABEL:
                self.missing.add(where[i])
                continue
            if value is None:
                if self.first_word is None:
                    self.first_word = (cell, where[i])
            else:
                numbers[i] = value
            if code is not None:
                codes[i] = code
        self._numbers.append(numbers)
        self._codes.append(codes)

    @property
    def numbers(self) -> np.ndarray:
        return np.concatenate(self._numbers) if self._numbers else np.empty(0)

    def words(self) -> tuple[np.ndarray, list[str]] | None:
        """(y, classes) with the texts as classes in sorted order; None if there were too many
        to remember them all (more than max_classes + 1)."""
        if len(self._texts) > self._keep:
            return None
        classes = sorted(self._texts)
        rank = np.empty(len(classes), dtype=np.int64)
        rank[[self._texts[name] for name in classes]] = np.arange(len(classes))
        return rank[np.concatenate(self._codes)], classes


def encode_target(
    labels: LabelColumn, task: str, *, subject: str, locate: Callable[[int], str], limits: DatasetLimits
) -> tuple[np.ndarray, str, list[str]]:
    """(y, task, classes). Labels that are all numbers are numbers (so "1" and "1.0" are one
    class); otherwise every label is a word."""
    numeric = labels.first_word is None
    numbers = labels.numbers
    if task == "auto":
        task = "classification" if not numeric or _looks_like_classes(numbers) else "regression"
    if task == "regression":
        if not numeric:
            word, where = labels.first_word
            raise DatasetError(
                f"{subject} has non-numeric values such as {word!r} ({locate(where)}), "
                "so it can't be used for regression. Choose classification instead."
            )
        y = numbers.astype(np.float32)
        if not np.isfinite(y).all():
            raise DatasetError("Some target values are too large for 32-bit floats.")
        return y, task, []

    if numeric:
        distinct, y = np.unique(numbers, return_inverse=True)  # sorted numerically
        classes = [_class_name(v) for v in distinct]
    elif (words := labels.words()) is not None:
        y, classes = words  # sorted alphabetically
    else:
        raise _too_many_classes(subject, f"more than {limits.max_classes:,}", limits)
    if len(classes) < 2:
        raise DatasetError(
            f"{subject} has only one class ({classes[0]!r}); classification needs at least two."
        )
    if len(classes) > limits.max_classes:
        raise _too_many_classes(subject, f"{len(classes):,}", limits)
    return y.ravel().astype(np.int64), task, classes


def _too_many_classes(subject: str, count: str, limits: DatasetLimits) -> DatasetError:
    return DatasetError(
        f"{subject} has {count} distinct values; a classifier here may have at most "
        f"{limits.max_classes:,} classes. If it is a number to predict, choose regression; if it "
        "identifies each row (an id, a name), choose another target; otherwise merge rare classes."
    )


def class_warnings(parsed: ParsedDataset) -> list[str]:
    """What the dataset page should point out about the classes: classes too small to be
    both learnt from and evaluated on."""
    if parsed.task != "classification":
        return []
    single = [name for name, count in parsed.class_counts.items() if count < 2]
    if not single:
        return []
    shown = ", ".join(repr(name) for name in single[:5]) + (", …" if len(single) > 5 else "")
    many = len(single) > 1
    return [
        f"{len(single):,} of the {len(parsed.classes):,} classes {'have' if many else 'has'} a single row "
        f"({shown}): {'they' if many else 'it'} cannot appear in both training and evaluation, so the split "
        "is not stratified and models are scored on classes they never saw. Add rows of "
        f"{'those classes' if many else 'that class'} or merge rare classes."
    ]


def _looks_like_classes(labels: np.ndarray) -> bool:
    if not np.all(labels == np.round(labels)):
        return False
    n_distinct = len(np.unique(labels))
    return n_distinct <= _MAX_AUTO_CLASSES and n_distinct < len(labels) / 2


def _class_name(value: object) -> str:
    if isinstance(value, np.floating):
        return str(int(value)) if value.is_integer() else repr(float(value))
    return str(value)


def rows_text(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def first_few(numbers: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return shown + (", …" if len(numbers) > limit else "")
