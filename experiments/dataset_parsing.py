"""Turn an uploaded file or a bundled scikit-learn dataset into validated training arrays.

Everything here is pure (no Django, no TensorFlow) so the web process can validate an upload
while the user waits and a worker can parse the same bytes again with identical results.
Every problem with the data raises DatasetError, whose text is shown to the user as is.

Four kinds of data share one ParsedDataset: tabular (this module), images (image_parsing),
text (text_parsing) and sequences (sequence_parsing); the bundled datasets live in bundled_data.
Those modules build on the helpers here, so this module imports them only where it needs them.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sklearn.model_selection import train_test_split

from experiments.errors import TuneboardError

TASKS = ("auto", "classification", "regression")
KINDS = ("tabular", "image", "text", "sequence")
_MB = 1024 * 1024
# Spellings people and spreadsheet exports use for "no value".
_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})
# "auto" reads integer targets as class labels only up to this many distinct values.
_MAX_AUTO_CLASSES = 50
_DELIMITERS = (",", ";", "\t")
# A small compressed .npz can expand to many GB; refuse before numpy allocates it.
_MAX_NPZ_EXPANDED_BYTES = 2 * 1024 * _MB


class DatasetError(TuneboardError, ValueError):
    """A problem with the user's data; str(exc) is the message shown to them."""


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
    from experiments import bundled_data  # it builds on this module; see the module docstring

    return bundled_data.load_bundled(name)


def __getattr__(name: str) -> object:
    # BUNDLED (name -> description) and BUNDLED_KINDS (name -> kind) are defined next to their
    # loaders in bundled_data and read from here on first use, which avoids a circular import.
    if name in ("BUNDLED", "BUNDLED_KINDS"):
        from experiments import bundled_data

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


def parse_csv(data: bytes, *, target_column: str, task: str = "auto") -> ParsedDataset:
    _check_task(task)
    header, body, lines = _read_csv(_decode_text(data))
    target_column = target_column.strip()
    if target_column not in header:
        raise DatasetError(_missing_column_message(target_column, header))
    if len(header) == 1:
        raise DatasetError(
            f"The file has only the target column {target_column!r}; "
            "there are no feature columns to learn from."
        )

    columns = dict(zip(header, zip(*body, strict=True), strict=True))
    target_cells = columns.pop(target_column)
    x, missing = _features(columns, lines)
    if missing:
        raise DatasetError(
            "Some feature values are missing: "
            + "; ".join(
                f"column {name!r} in {_rows(len(at))} (first row {at[0]})"
                for name, at in missing.items()
            )
            + ". Fill them in or remove those rows."
        )

    y, task, classes = _csv_target(target_cells, lines, target_column, task)
    return _finish(x, y, list(columns), task, classes, target_column)


def _csv_target(
    cells: tuple[str, ...] | list[str], lines: list[int], target_column: str, task: str
) -> tuple[np.ndarray, str, list[str]]:
    """(y, task, classes) from a CSV target column; refuses rows without a label."""
    unlabeled = [line for cell, line in zip(cells, lines, strict=True) if _is_missing(cell)]
    if unlabeled:
        raise DatasetError(
            f"{_rows(len(unlabeled)).capitalize()} {'has' if len(unlabeled) == 1 else 'have'} "
            f"no value in the target column {target_column!r} "
            f"(row{'s' if len(unlabeled) > 1 else ''} {_first_few(unlabeled)}). "
            "Fill them in or remove those rows."
        )
    return _encode_target(
        _labels(cells),
        task,
        subject=f"The target column {target_column!r}",
        locate=lambda i: f"row {lines[i]}",
    )


def _decode_text(data: bytes) -> str:
    if not data.strip():
        raise DatasetError("The file is empty.")
    if data.startswith(b"PK\x03\x04"):
        raise DatasetError(
            "This looks like a zip or Excel (.xlsx) file, not CSV text. "
            "Save it as CSV and upload that."
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DatasetError("The file is UTF-16 text. Save the CSV as UTF-8 and upload it again.")
    if b"\x00" in data[:8192]:
        raise DatasetError("This looks like a binary file, not CSV text.")
    try:
        return data.decode("utf-8-sig")  # -sig: Excel writes a byte-order mark
    except UnicodeDecodeError as exc:
        raise DatasetError(
            f"The file is not UTF-8 text (unreadable byte at position {exc.start}). "
            "Save the CSV with UTF-8 encoding and upload it again."
        ) from None


def _read_csv(text: str) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, data rows (cells stripped) and each data row's line number in the file."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=_sniff_delimiter(text))
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            cells = [cell.strip() for cell in row]
            if any(cells):
                rows.append(cells)
                lines.append(reader.line_num)
    except csv.Error as exc:
        raise DatasetError(
            f"The file could not be read as CSV near row {reader.line_num}: {exc}."
        ) from None
    if not rows:
        raise DatasetError("The file is empty.")
    header, body, lines = rows[0], rows[1:], lines[1:]
    if not body:
        raise DatasetError("The file has a header row but no data rows.")

    # Spreadsheets often leave trailing empty columns ("a,b,"); those aren't real columns.
    while header and not header[-1]:
        header.pop()
    width = len(header)
    for i, row in enumerate(body):
        if len(row) > width and not any(row[width:]):
            body[i] = row = row[:width]
        if len(row) != width:
            raise DatasetError(
                f"Row {lines[i]} has {len(row)} values, but the header has {width} columns."
            )
    seen: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        if not name:
            raise DatasetError(f"Column {number} has no name in the header row.")
        if name in seen:
            raise DatasetError(
                f"The header has two columns named {name!r} (columns {seen[name]} and {number}); "
                "column names must be unique."
            )
        seen[name] = number
    return header, body, lines


def _sniff_delimiter(text: str) -> str:
    """Pick the delimiter that splits the first lines into the same number (>1) of columns.

    csv.Sniffer is not used: it fails outright on some valid files and guesses letters.
    """
    sample = text[:65536]
    if len(text) > len(sample):
        sample = sample[: sample.rfind("\n") + 1] or sample

    def score(delimiter: str) -> tuple[bool, int]:
        reader = csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter)
        try:
            widths = [len(row) for row in reader if any(cell.strip() for cell in row)]
        except csv.Error:
            return (False, 0)
        consistent = bool(widths) and widths[0] > 1 and len(set(widths)) == 1
        return (consistent, widths[0] if widths else 0)

    return max(_DELIMITERS, key=score)  # ties keep the earlier one, so comma wins


def _missing_column_message(target_column: str, header: list[str]) -> str:
    shown = ", ".join(header[:30]) + (f", … ({len(header) - 30} more)" if len(header) > 30 else "")
    message = f"There is no column named {target_column!r}. Available columns: {shown}."
    if all(_as_number(name) is not None for name in header):
        message += " The first row looks like data: the file needs a header row of column names."
    return message


def _features(
    columns: dict[str, tuple[str, ...]], lines: list[int]
) -> tuple[np.ndarray, dict[str, list[int]]]:
    """Feature matrix plus, per column, the rows with missing values."""
    values: list[np.ndarray] = []
    missing: dict[str, list[int]] = {}
    for name, cells in columns.items():
        try:  # fast path for clean columns; the loop below only runs to explain a problem
            column = np.asarray(cells, dtype=np.float64)
            if np.isfinite(column).all():
                values.append(column)
                continue
        except ValueError:
            pass
        column = np.full(len(cells), np.nan)
        bad: list[int] = []
        for i, cell in enumerate(cells):
            if _is_missing(cell):
                missing.setdefault(name, []).append(lines[i])
            elif (number := _as_number(cell)) is None:
                bad.append(i)
            else:
                column[i] = number
        if bad:
            raise DatasetError(_non_numeric_message(name, cells, bad, lines))
        values.append(column)
    return np.column_stack(values), missing


def _non_numeric_message(
    name: str, cells: tuple[str, ...], bad: list[int], lines: list[int]
) -> str:
    example = cells[bad[0]]
    message = f"Column {name!r} must contain numbers, but row {lines[bad[0]]} has {example!r}"
    if len(bad) > 1:
        message += f" ({len(bad) - 1} more {'row has' if len(bad) == 2 else 'rows have'} "
        message += "non-numeric values)"
    if _as_number(example.replace(",", ".")) is not None:
        message += ". Use a point, not a comma, as the decimal separator"
    return message + ". Feature columns must be numeric: encode categories as numbers or drop them."


# --- NPZ ----------------------------------------------------------------------------------


def parse_npz(
    data: bytes,
    *,
    task: str = "auto",
    kind: str = "auto",
    image_size: tuple[int, int] | None = None,
) -> ParsedDataset:
    """Arrays x and y from numpy.savez. kind "auto" reads x by its shape: (n, h, w, channels)
    is images, (n, h, w) too when its type is uint8, other (n, steps, features) arrays are
    sequences and (n,) or (n, features) is tabular. image_size (height, width) resizes images
    and is ignored for other kinds."""
    _check_task(task)
    if kind not in ("auto", "tabular", "image", "sequence"):
        raise DatasetError(f"Unknown kind {kind!r} for an .npz file; use auto, tabular, image or sequence.")
    if not data:
        raise DatasetError("The file is empty.")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:  # numpy raises ValueError, OSError, EOFError, BadZipFile... for junk
        raise DatasetError(
            "The file is not a valid .npz archive. Save the arrays with "
            "numpy.savez(path, x=..., y=...) and upload that file."
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise DatasetError(
            "This is a single NumPy array (.npy), not an .npz archive. Save both arrays with "
            "numpy.savez(path, x=..., y=...) and upload that file."
        )
    with archive:
        absent = [key for key in ("x", "y") if key not in archive.files]
        if absent:
            found = ", ".join(archive.files) if archive.files else "no arrays at all"
            raise DatasetError(
                f"The .npz file has no array named {absent[0]!r}; it contains {found}. "
                "Name the inputs x and the labels y."
            )
        expanded = sum(info.file_size for info in archive.zip.infolist())
        if expanded > _MAX_NPZ_EXPANDED_BYTES:
            raise DatasetError(
                f"The arrays take {expanded / _MB / 1024:.1f} GB once unpacked; "
                f"the limit is {_MAX_NPZ_EXPANDED_BYTES // _MB // 1024} GB."
            )
        x, y = _read_array(archive, "x"), _read_array(archive, "y")

    if x.ndim == 0:
        raise DatasetError("x must have one row per sample, but it is a single number.")
    if x.dtype.kind not in "biuf":
        raise DatasetError(f"x must contain numbers, but its type is {x.dtype}.")
    kind = _npz_kind(x, kind)
    if x.ndim == 1:
        x = x.reshape(-1, 1)  # one feature per row
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1:
        raise DatasetError(
            f"y must have one label per row, shape (n,) or (n, 1), but its shape is {y.shape}. "
            "If y is one-hot encoded, save the class index instead (y.argmax(axis=1))."
        )
    if len(x) != len(y):
        raise DatasetError(f"x has {len(x)} rows but y has {len(y)}; they must match.")
    if len(x) == 0:
        raise DatasetError("The arrays are empty: x and y have no rows.")

    if y.dtype.kind in "biuf":
        labels = y.astype(np.float64)
        unlabeled = int((~np.isfinite(labels)).sum())
    elif y.dtype.kind in "US":
        cells = [
            (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)).strip() for v in y
        ]
        unlabeled = sum(_is_missing(cell) for cell in cells)
        labels = _labels(cells)
    else:
        raise DatasetError(f"y must contain numbers or strings, but its type is {y.dtype}.")
    if unlabeled:
        raise DatasetError(
            f"{_rows(unlabeled).capitalize()} {'has' if unlabeled == 1 else 'have'} "
            "a missing (NaN or empty) label in y. Remove those rows or fill them in."
        )
    y_encoded, task, classes = _encode_target(labels, task, subject="y", locate=lambda i: f"y[{i}]")
    if kind == "image":
        from experiments.image_parsing import image_array  # it builds on this module

        images, details = image_array(x, image_size=image_size)
        return ParsedDataset(images, y_encoded, [], task, classes, "y", kind="image", details=details)
    if kind == "sequence":
        from experiments.sequence_parsing import sequence_array  # it builds on this module

        sequences, details = sequence_array(x)
        names = [f"f{i}" for i in range(sequences.shape[2])]
        return ParsedDataset(sequences, y_encoded, names, task, classes, "y", kind="sequence", details=details)
    feature_names = [f"f{i}" for i in range(math.prod(x.shape[1:]))]
    return _finish(x, y_encoded, feature_names, task, classes, "y")


def _npz_kind(x: np.ndarray, kind: str) -> str:
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


def _read_array(archive: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    try:
        return archive[key]
    except Exception:  # object arrays need pickle; damaged members fail in zipfile
        raise DatasetError(
            f"The array {key!r} in the .npz file could not be read: it is damaged or holds "
            "Python objects. Save plain numeric (or string) arrays."
        ) from None


# --- shared -------------------------------------------------------------------------------


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


def _labels(cells: list[str] | tuple[str, ...]) -> np.ndarray:
    """float64 when every label is a number (so "1" and "1.0" are one class), else strings."""
    numbers = [_as_number(cell) for cell in cells]
    if all(number is not None for number in numbers):
        return np.asarray(numbers, dtype=np.float64)
    return np.asarray(cells, dtype=str)


def _encode_target(
    labels: np.ndarray, task: str, *, subject: str, locate: Callable[[int], str]
) -> tuple[np.ndarray, str, list[str]]:
    numeric = labels.dtype.kind == "f"
    if task == "auto":
        task = "classification" if not numeric or _looks_like_classes(labels) else "regression"
    if task == "regression":
        if not numeric:
            i = next(i for i, v in enumerate(labels) if _as_number(str(v)) is None)
            raise DatasetError(
                f"{subject} has non-numeric values such as {str(labels[i])!r} ({locate(i)}), "
                "so it can't be used for regression. Choose classification instead."
            )
        return labels.astype(np.float32), task, []

    distinct, y = np.unique(labels, return_inverse=True)  # sorted numerically or alphabetically
    classes = [_class_name(v) for v in distinct]
    if len(classes) < 2:
        raise DatasetError(
            f"{subject} has only one class ({classes[0]!r}); classification needs at least two."
        )
    return y.ravel().astype(np.int64), task, classes


def _looks_like_classes(labels: np.ndarray) -> bool:
    if not np.all(labels == np.round(labels)):
        return False
    n_distinct = len(np.unique(labels))
    return n_distinct <= _MAX_AUTO_CLASSES and n_distinct < len(labels) / 2


def _class_name(value: object) -> str:
    if isinstance(value, np.floating):
        return str(int(value)) if value.is_integer() else repr(float(value))
    return str(value)


def _finish(
    x: np.ndarray,
    y: np.ndarray,
    feature_names: list[str],
    task: str,
    classes: list[str],
    target_name: str,
) -> ParsedDataset:
    x = x.astype(np.float32)
    bad = ~np.isfinite(x.reshape(len(x), -1)).all(axis=1)
    if bad.any():
        first = int(np.argmax(bad)) + 1
        # CSV values are checked per column before this; here it's NaN/inf in an npz or
        # numbers too large for 32-bit floats.
        raise DatasetError(
            "The inputs have missing (NaN) or infinite values, or numbers too large for 32-bit "
            f"floats, in {_rows(int(bad.sum()))} (the first is data row {first}). "
            "Fill them in or remove those rows."
        )
    if task == "regression" and not np.isfinite(y).all():
        raise DatasetError("Some target values are too large for 32-bit floats.")
    return ParsedDataset(x, y, feature_names, task, classes, target_name)


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
