"""Turn an uploaded file or a bundled scikit-learn dataset into validated training arrays.

Everything here is pure (no Django, no TensorFlow) so the web process can validate an upload
while the user waits and a worker can parse the same bytes again with identical results.
Every problem with the data raises DatasetError, whose text is shown to the user as is.

Four kinds of data share one ParsedDataset: tabular (this module), images (image_parsing),
text (text_parsing) and sequences (sequence_parsing); the bundled datasets live in bundled_data.
Those modules, and the readers of CSV (csv_reading) and .npz files (npz_reading), build on the
helpers here, so this module imports them only where it needs them.

An upload can be far larger in memory than on disk (a 400 KB .npz of zeros unpacks to 400 MB),
so uploads are read a block of rows at a time and their inputs x are written to temporary
files (array_files); only the labels and the split indices, a few bytes a row, are held in
memory, and DatasetLimits bounds the rows, the bytes and the classes before anything large
is unpacked.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
from sklearn.model_selection import train_test_split

from experiments.errors import TuneboardError

TASKS = ("auto", "classification", "regression")
KINDS = ("tabular", "image", "text", "sequence")
_MB = 1024 * 1024
_GB = 1024 * _MB
# Spellings people and spreadsheet exports use for "no value".
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})
# "auto" reads integer targets as class labels only up to this many distinct values.
_MAX_AUTO_CLASSES = 50
_NO_LABEL = object()  # a target cell spelt as missing


class DatasetError(TuneboardError, ValueError):
    """A problem with the user's data; str(exc) is the message shown to them."""


@dataclass(frozen=True)
class DatasetLimits:
    """What one upload may become; the service reads them from the settings.

    The arrays stay on disk, so max_bytes (their size unpacked, and the size of the stored
    inputs) bounds disk space and the workers' memory, not the web's. What the web process
    does hold is about 100 bytes a row (labels, split indices, and scikit-learn's stratified
    split), so max_rows is what bounds its memory. More than max_classes classes is refused:
    a target with that many distinct values is an identifier or a number, not a class.
    """

    max_bytes: int = 2 * _GB
    max_rows: int = 1_000_000
    max_classes: int = 1_000


DEFAULT_LIMITS = DatasetLimits()


@dataclass
class ParsedDataset:
    """Validated arrays plus what the dataset page shows about them.

    x by kind: tabular float32 (n_rows, *input_shape); image uint8 (n, height, width, channels)
    with 1, 3 or 4 channels; text a NumPy unicode array of shape (n,) (it survives
    numpy.savez without pickle); sequence float32 (n, timesteps, features).
    """

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


def load_bundled(name: str) -> ParsedDataset:
    from experiments.datasets import bundled as bundled_data  # it builds on this module; see the module docstring

    return bundled_data.load_bundled(name)


def __getattr__(name: str) -> object:
    # BUNDLED (name -> description) and BUNDLED_KINDS (name -> kind) are defined next to their
    # loaders in bundled_data and read from here on first use, which avoids a circular import.
    if name in ("BUNDLED", "BUNDLED_KINDS"):
        from experiments.datasets import bundled as bundled_data

        return getattr(bundled_data, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_upload_size(size_bytes: int, limit_mb: int) -> None:
    if size_bytes <= limit_mb * _MB:
        return
    shown = f"{size_bytes / _MB:.1f}"
    if float(shown) <= limit_mb:  # rounding would hide why 50.01 MB is over a 50 MB limit
        raise DatasetError(
            f"The file is {size_bytes:,} bytes, just over the limit of {limit_mb} MB "
            f"({limit_mb * _MB:,} bytes)."
        )
    raise DatasetError(f"The file is {shown} MB; the limit is {limit_mb} MB.")


# --- CSV ----------------------------------------------------------------------------------


def parse_csv(
    data: bytes | BinaryIO, *, target_column: str, task: str = "auto", limits: DatasetLimits = DEFAULT_LIMITS
) -> ParsedDataset:
    from experiments.datasets.arrays import ArrayWriter  # they build on this module
    from experiments.datasets.csv_reader import CsvTable, NumericColumns, missing_column_message

    _check_task(task)
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
    feature_at = [header.index(name) for name in features]
    target_at = header.index(target_column)
    numbers, labels, too_large = NumericColumns(features), LabelColumn(limits.max_classes), NonFinite()
    with ArrayWriter(np.float32, (len(features),)) as writer:
        for rows, lines in table.batches():
            check_rows(writer.n_rows + len(rows), limits)
            check_bytes((writer.n_rows + len(rows)) * len(features) * 4, limits, "The inputs as 32-bit floats")
            columns = list(zip(*rows, strict=True))
            values = numbers.add([columns[j] for j in feature_at], lines)
            labels.add(columns[target_at], lines)
            x = values.astype(np.float32)
            # Numbers fine as float64 may overflow float32; missing cells are refused below.
            too_large.add(np.isfinite(values).all(axis=1) & ~np.isfinite(x).all(axis=1), writer.n_rows)
            writer.write(x)
        numbers.check(features, missing_advice="Fill them in or remove those rows.")
        too_large.refuse_rows()
        y, task, classes = csv_target(labels, target_column, task, limits)
        return ParsedDataset(writer.finish(), y, features, task, classes, target_column)


def csv_target(
    labels: LabelColumn, target_column: str, task: str, limits: DatasetLimits
) -> tuple[np.ndarray, str, list[str]]:
    """(y, task, classes) from a CSV target column; refuses rows without a label."""
    if labels.missing.count:
        count = labels.missing.count
        raise DatasetError(
            f"{_rows(count).capitalize()} {'has' if count == 1 else 'have'} "
            f"no value in the target column {target_column!r} "
            f"(row{'s' if count > 1 else ''} {_first_few(labels.missing.first)}). "
            "Fill them in or remove those rows."
        )
    return _encode_target(
        labels, task, subject=f"The target column {target_column!r}", locate=lambda line: f"row {line}", limits=limits
    )


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
                f"floats, in {_rows(self.rows)} (the first is data row {self.first + 1}). "
                "Fill them in or remove those rows."
            )


# --- NPZ ----------------------------------------------------------------------------------


def parse_npz(
    data: bytes | BinaryIO,
    *,
    task: str = "auto",
    kind: str = "auto",
    image_size: tuple[int, int] | None = None,
    limits: DatasetLimits = DEFAULT_LIMITS,
) -> ParsedDataset:
    """Arrays x and y from numpy.savez. kind "auto" reads x by its shape: (n, h, w, channels)
    is images, (n, h, w) too when its type is uint8, other (n, steps, features) arrays are
    sequences and (n,) or (n, features) is tabular. image_size (height, width) resizes images
    and is ignored for other kinds.

    Everything that can be known from the arrays' headers (types, shapes, sizes) is checked
    before any array is unpacked; then y is read, then x, a block at a time."""
    from experiments.datasets.npz_reader import NpzArchive  # it builds on this module

    _check_task(task)
    if kind not in ("auto", "tabular", "image", "sequence"):
        raise DatasetError(f"Unknown kind {kind!r} for an .npz file; use auto, tabular, image or sequence.")
    file = binary_file(data)
    if _is_empty(file):
        raise DatasetError("The file is empty.")
    with NpzArchive(file) as archive:
        absent = [key for key in ("x", "y") if key not in archive.keys]
        if absent:
            found = ", ".join(archive.keys) if archive.keys else "no arrays at all"
            raise DatasetError(
                f"The .npz file has no array named {absent[0]!r}; it contains {found}. "
                "Name the inputs x and the labels y."
            )
        x_header, y_header = archive.header("x"), archive.header("y")
        check_bytes(x_header.nbytes + y_header.nbytes, limits, "The arrays, once unpacked,")
        kind = _check_npz_shapes(x_header, y_header, kind, limits)
        y_encoded, task, classes = _npz_labels(archive.unpack(y_header), task, limits)
        x = archive.unpack(x_header)

    if kind == "image":
        from experiments.datasets.image_reader import image_array  # it builds on this module

        images, details = image_array(x, image_size=image_size, limits=limits)
        return ParsedDataset(images, y_encoded, [], task, classes, "y", kind="image", details=details)
    if kind == "sequence":
        from experiments.datasets.sequence_reader import sequence_array  # it builds on this module

        sequences, details = sequence_array(x, limits=limits)
        names = [f"f{i}" for i in range(sequences.shape[2])]
        return ParsedDataset(sequences, y_encoded, names, task, classes, "y", kind="sequence", details=details)
    if x.ndim == 1:
        x = x.reshape(-1, 1)  # one feature per row
    feature_names = [f"f{i}" for i in range(math.prod(x.shape[1:]))]
    return ParsedDataset(_float32_rows(x, limits), y_encoded, feature_names, task, classes, "y")


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
    from experiments.datasets.arrays import blocks  # it builds on this module

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
            f"{_rows(unlabeled).capitalize()} {'has' if unlabeled == 1 else 'have'} "
            "a missing (NaN or empty) label in y. Remove those rows or fill them in."
        )
    return _encode_target(labels, task, subject="y", locate=lambda i: f"y[{i}]", limits=limits)


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


def _float32_rows(x: np.ndarray, limits: DatasetLimits = DEFAULT_LIMITS) -> np.ndarray:
    """x as float32 on disk; refuses rows that are not all finite numbers (NaN, infinity, or
    too large for 32-bit floats)."""
    from experiments.datasets.arrays import converted  # it builds on this module

    check_bytes(x.size * 4, limits, "The inputs as 32-bit floats")
    bad = NonFinite()
    rows = converted(x, np.float32, check=lambda block, start: bad.add(~np.isfinite(block), start))
    bad.refuse_rows()
    return rows


# --- shared -------------------------------------------------------------------------------


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
    return f"{nbytes / _GB:.1f} GB" if nbytes >= _GB else f"{nbytes / _MB:,.1f} MB"


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise DatasetError(f"Unknown task {task!r}; use one of: {', '.join(TASKS)}.")


def _is_missing(cell: str) -> bool:
    return cell.lower() in _MISSING


def _as_number(cell: str) -> float | None:
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
    _kept = 6  # _first_few shows five and an ellipsis when there are more

    def add(self, where: int, value: str = "") -> None:
        if not self.count:
            self.value = value
        if len(self.first) < self._kept:
            self.first.append(where)
        self.count += 1


class LabelColumn:
    """A target read a batch at a time. Each cell is kept as a number (NaN when it is not one)
    and as the index of its text among the distinct texts seen, so a column of words costs
    12 bytes a row instead of a Python string. Only max_classes + 1 distinct texts are
    remembered: enough to refuse more classes, and a column of distinct numbers (a regression
    target) does not fill memory with them."""

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
                value = _NO_LABEL if _is_missing(cell) else _as_number(cell)
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


def _encode_target(
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


def _rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def _first_few(numbers: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return shown + (", …" if len(numbers) > limit else "")


# --- splitting ----------------------------------------------------------------------------


def split_indices(
    parsed: ParsedDataset, *, val_fraction: float, test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted (train, val, test) row indices; stratified by class when every class allows it.

    Rule: validation and test get round(n * fraction) rows but at least one each, and training
    must keep at least one row. Stratification is attempted per split and quietly dropped when
    a class is too small to appear on both sides.

    A time-ordered dataset (parsed.time_ordered) is cut into contiguous blocks instead, never
    shuffled and whatever the seed: training first, then validation, then test, so the model
    is always judged on a later period than the one it learnt from. When its rows are sliding
    windows (details has "window" and "horizon"), neighbouring samples share time steps: sample
    i reads rows i .. i + window + horizon - 1. So the window + horizon - 1 samples just before
    the validation block and just before the test block are dropped, and no time step is seen
    by two parts. Validation and test keep their sizes from the rule above; the dropped samples
    come out of training, which must still keep at least one.
    """
    for label, fraction in (("validation", val_fraction), ("test", test_fraction)):
        if not 0 < fraction < 1:
            raise DatasetError(
                f"The {label} fraction must be between 0 and 1 (exclusive), got {fraction}."
            )
    if val_fraction + test_fraction >= 1:
        raise DatasetError(
            f"The validation ({val_fraction}) and test ({test_fraction}) fractions add up to "
            f"{val_fraction + test_fraction:g}; they must add up to less than 1 so rows are "
            "left for training."
        )

    gap = 0
    if parsed.time_ordered and "window" in parsed.details:
        gap = int(parsed.details["window"]) + int(parsed.details.get("horizon", 1)) - 1

    def sizes(n: int) -> tuple[int, int]:
        return max(1, round(n * val_fraction)), max(1, round(n * test_fraction))

    n = parsed.n_rows
    n_val, n_test = sizes(n)
    n_train = n - n_val - n_test - 2 * gap
    if n_train < 1:
        need = next((m for m in range(3, 10_000_000) if m - sum(sizes(m)) - 2 * gap >= 1), None)
        if gap:
            raise DatasetError(
                f"The series gives {n} windows, but a time-ordered split with {val_fraction:.0%} "
                f"validation and {test_fraction:.0%} test needs at least {need or 'far more'}: "
                f"the {gap} windows before the validation block and the {gap} before the test "
                "block are left out so that no time step is in two parts, and training, "
                "validation and test must each keep at least one window. Use a longer series, "
                "a smaller window or horizon, or smaller fractions."
            )
        raise DatasetError(
            f"The dataset has {_rows(n)}, but a split with {val_fraction:.0%} validation and "
            f"{test_fraction:.0%} test needs at least {need or 'far more'} rows: training, "
            "validation and test must each get at least one row."
        )

    if parsed.time_ordered:
        val_start = n_train + gap
        test_start = val_start + n_val + gap
        return (
            np.arange(n_train, dtype=np.int64),
            np.arange(val_start, val_start + n_val, dtype=np.int64),
            np.arange(test_start, n, dtype=np.int64),
        )

    labels = parsed.y if parsed.task == "classification" else None
    rest, test = _split(np.arange(n), labels, n_test, seed)
    train, val = _split(rest, None if labels is None else labels[rest], n_val, seed)
    return np.sort(train), np.sort(val), np.sort(test)


def _split(
    indices: np.ndarray, labels: np.ndarray | None, n_out: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept, taken) where taken has n_out of the indices."""
    options = {"test_size": n_out, "random_state": seed % 2**32}  # sklearn needs [0, 2**32)
    if labels is not None:
        try:
            kept, taken = train_test_split(indices, stratify=labels, **options)
            return kept, taken
        except ValueError:
            pass  # a class has too few rows to appear on both sides
    kept, taken = train_test_split(indices, **options)
    return kept, taken
