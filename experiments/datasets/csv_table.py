"""Reading an uploaded CSV a batch of rows at a time, so a file of any length costs the web process one batch of
strings."""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

import numpy as np

from experiments.datasets.core import (
    DatasetError,
    DatasetLimits,
    LabelColumn,
    Occurrences,
    as_number,
    binary_file,
    encode_target,
    first_few,
    is_missing,
    rows_text,
)

_DELIMITERS = (",", ";", "\t")
_SNIFF_CHARS = 65536
_READ_BYTES = 1024 * 1024
# A batch holds about this many cells (as Python strings, ~60 bytes each).
_BATCH_CELLS = 100_000

Batch = tuple[list[list[str]], list[int]]  # rows of stripped cells, and each row's line in the file


class CsvTable:
    """An uploaded CSV: checked, its delimiter sniffed and its header read on creation."""

    def __init__(self, data: bytes | BinaryIO):
        self._file = binary_file(data)
        _check_text(self._file)
        with self._text() as text:
            sample = text.read(_SNIFF_CHARS)
            if text.read(1):  # a longer file: sniff whole lines only
                sample = sample[: sample.rfind("\n") + 1] or sample
        self.delimiter = _sniff_delimiter(sample)
        with self._rows() as rows:
            first = next(rows, None)
        if first is None:
            raise DatasetError("The file is empty.")
        self.header = _checked_header(first[0])

    @contextmanager
    def _text(self) -> Iterator[io.TextIOWrapper]:
        self._file.seek(0)
        text = io.TextIOWrapper(self._file, encoding="utf-8-sig", newline="")
        try:
            yield text
        finally:
            text.detach()  # the file belongs to the caller: don't let the wrapper close it

    @contextmanager
    def _rows(self) -> Iterator[Iterator[tuple[list[str], int]]]:
        """Non-empty rows, cells stripped, with the line each starts on."""
        with self._text() as text:
            reader = csv.reader(text, delimiter=self.delimiter)

            def rows() -> Iterator[tuple[list[str], int]]:
                try:
                    for row in reader:
                        cells = list(map(str.strip, row))
                        if any(cells):
                            yield cells, reader.line_num
                except csv.Error as exc:
                    raise DatasetError(
                        f"The file could not be read as CSV near row {reader.line_num}: {csv_problem(exc)}."
                    ) from None

            yield rows()

    def batches(self) -> Iterator[Batch]:
        """The data rows, a batch at a time; refuses a row whose width differs from the header's."""
        width = len(self.header)
        per_batch = max(1, _BATCH_CELLS // width)
        body: list[list[str]] = []
        lines: list[int] = []
        any_rows = False
        with self._rows() as rows:
            next(rows)  # the header
            for cells, line in rows:
                if len(cells) > width and not any(cells[width:]):
                    cells = cells[:width]  # trailing empty columns from a spreadsheet
                if len(cells) != width:
                    raise DatasetError(f"Row {line} has {len(cells)} values, but the header has {width} columns.")
                body.append(cells)
                lines.append(line)
                if len(body) >= per_batch:
                    yield body, lines
                    body, lines, any_rows = [], [], True
        if body:
            yield body, lines
        elif not any_rows:
            raise DatasetError("The file has a header row but no data rows.")


def _check_text(file: BinaryIO) -> None:
    """Refuse what is not UTF-8 CSV text, reading the file once in blocks."""
    file.seek(0)
    head = file.read(8192)
    file.seek(0)
    decoder = codecs.getincrementaldecoder("utf-8")()
    blank, offset, bad_at = True, 0, None
    while block := file.read(_READ_BYTES):
        blank = blank and not block.strip()
        if bad_at is None:
            pending = len(decoder.getstate()[0])
            try:
                decoder.decode(block)
            except UnicodeDecodeError as exc:
                bad_at = offset - pending + exc.start
        offset += len(block)
    if bad_at is None:
        pending = len(decoder.getstate()[0])
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            bad_at = offset - pending + exc.start
    file.seek(0)
    if blank:
        raise DatasetError("The file is empty.")
    if head.startswith(b"PK\x03\x04"):
        raise DatasetError("This looks like a zip or Excel (.xlsx) file, not CSV text. Save it as CSV and upload that.")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DatasetError("The file is UTF-16 text. Save the CSV as UTF-8 and upload it again.")
    if b"\x00" in head:
        raise DatasetError("This looks like a binary file, not CSV text.")
    if bad_at is not None:
        raise DatasetError(
            f"The file is not UTF-8 text (unreadable byte at position {bad_at}). "
            "Save the CSV with UTF-8 encoding and upload it again."
        )


def csv_problem(exc: csv.Error) -> str:
    """csv's error in a person's words (its field limit is the one a typed value meets)."""
    if "field larger than field limit" in str(exc):
        return f"a value is longer than {csv.field_size_limit():,} characters, more than any cell takes"
    return str(exc)


def _sniff_delimiter(sample: str) -> str:
    """Pick the delimiter that splits the first lines into the same number (>1) of columns.

    csv.Sniffer is not used: it fails outright on some valid files and guesses letters.
    """

    def score(delimiter: str) -> tuple[bool, int]:
        reader = csv.reader(io.StringIO(sample, newline=""), delimiter=delimiter)
        try:
            widths = [len(row) for row in reader if any(cell.strip() for cell in row)]
        except csv.Error:
            return (False, 0)
        consistent = bool(widths) and widths[0] > 1 and len(set(widths)) == 1
        return (consistent, widths[0] if widths else 0)

    return max(_DELIMITERS, key=score)  # ties keep the earlier one, so comma wins


def _checked_header(header: list[str]) -> list[str]:
    # Spreadsheets often leave trailing empty columns ("a,b,"); those aren't real columns.
    while header and not header[-1]:
        header.pop()
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
    return header


def missing_column_message(column: str, header: list[str]) -> str:
    shown = ", ".join(header[:30]) + (f", … ({len(header) - 30} more)" if len(header) > 30 else "")
    message = f"There is no column named {column!r}. Available columns: {shown}."
    if all(as_number(name) is not None for name in header):
        message += " The first row looks like data: the file needs a header row of column names."
    return message


class NumericColumns:
    """Columns that must hold numbers, converted a batch at a time."""

    def __init__(self, names: list[str]):
        self.names = names
        self.has_number = [False] * len(names)
        self.missing = [Occurrences() for _ in names]
        self.non_numeric = [Occurrences() for _ in names]

    def add(self, columns: list[tuple[str, ...]], lines: list[int]) -> np.ndarray:
        """The batch as float64 (rows, columns); NaN where a cell is missing or not a number."""
        values = np.full((len(lines), len(columns)), np.nan)
        for j, cells in enumerate(columns):
            try:  # fast path for clean cells; the loop below only runs to find the problems
                column = np.asarray(cells, dtype=np.float64)
                if np.isfinite(column).all():
                    values[:, j] = column
                    self.has_number[j] = True
                    continue
                self.has_number[j] = True  # numpy read every cell, "nan" included
            except ValueError:
                pass
            for i, cell in enumerate(cells):
                if is_missing(cell):
                    self.missing[j].add(lines[i])
                elif (number := as_number(cell)) is None:
                    self.non_numeric[j].add(lines[i], cell)
                else:
                    values[i, j] = number
                    self.has_number[j] = True
        return values

    def check(self, names: list[str], *, missing_advice: str, subject: str = "feature values") -> None:
        """Refuse the first of these columns with a value that is not a number, else list those
        with missing values."""
        index = {name: j for j, name in enumerate(self.names)}
        for name in names:
            found = self.non_numeric[index[name]]
            if found.count:
                raise DatasetError(_non_numeric_message(name, found))
        missing = [(name, self.missing[index[name]]) for name in names if self.missing[index[name]].count]
        if missing:
            raise DatasetError(
                f"Some {subject} are missing: "
                + "; ".join(
                    f"column {name!r} in {rows_text(found.count)} (first row {found.first[0]})"
                    for name, found in missing
                )
                + f". {missing_advice}"
            )


def _non_numeric_message(name: str, found: Occurrences) -> str:
    message = f"Column {name!r} must contain numbers, but row {found.first[0]} has {found.value!r}"
    if found.count > 1:
        message += f" ({found.count - 1} more {'row has' if found.count == 2 else 'rows have'} non-numeric values)"
    if as_number(found.value.replace(",", ".")) is not None:
        message += ". Use a point, not a comma, as the decimal separator"
    return message + ". Feature columns must be numeric: encode categories as numbers or drop them."


def csv_target(
    labels: LabelColumn, target_column: str, task: str, limits: DatasetLimits
) -> tuple[np.ndarray, str, list[str]]:
    """(y, task, classes) from a CSV target column; refuses rows without a label."""
    if labels.missing.count:
        count = labels.missing.count
        raise DatasetError(
            f"{rows_text(count).capitalize()} {'has' if count == 1 else 'have'} "
            f"no value in the target column {target_column!r} "
            f"(row{'s' if count > 1 else ''} {first_few(labels.missing.first)}). "
            "Fill them in or remove those rows."
        )
    return encode_target(
        labels, task, subject=f"The target column {target_column!r}", locate=lambda line: f"row {line}", limits=limits
    )
