"""Arrays as large as a dataset, kept on disk and read a block at a time, so the web process never holds one
whole."""

from __future__ import annotations

import math
import mmap
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import numpy as np

BLOCK_BYTES = 4 * 1024 * 1024


def rows_per_block(x: np.ndarray) -> int:
    row_bytes = math.prod(x.shape[1:]) * x.dtype.itemsize
    return max(1, BLOCK_BYTES // max(1, row_bytes))


def _mapping(x: np.ndarray) -> mmap.mmap | None:
    base = x
    while isinstance(base, np.ndarray):
        base = base.base
    return base if isinstance(base, mmap.mmap) else None


def release(x: np.ndarray) -> None:
    """Drop the pages of a file-backed x from this process's memory (they stay on disk)."""
    mapping = _mapping(x)
    if mapping is not None and not mapping.closed:
        mapping.madvise(mmap.MADV_DONTNEED)


def blocks(x: np.ndarray, indices: np.ndarray | None = None) -> Iterator[np.ndarray]:
    """In-memory copies of x's rows, all of them or x[indices], a block at a time, in order."""
    step = rows_per_block(x)
    n = len(x) if indices is None else len(indices)
    for start in range(0, n, step):
        if indices is None:
            part = np.array(x[start : start + step])
        else:
            part = np.asarray(x[indices[start : start + step]])
        release(x)
        yield part


def _as_bytes(rows: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(rows).reshape(-1).view(np.uint8)


class ArrayWriter:
    """An array built row block by row block in an anonymous temporary file, so nothing is left behind whatever
    happens."""

    def __init__(self, dtype, row_shape: Iterable[int]):
        self.dtype = np.dtype(dtype)
        self.row_shape = tuple(int(d) for d in row_shape)
        self.n_rows = 0
        self._file = tempfile.TemporaryFile(prefix="tuneboard-array-")

    def write(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=self.dtype)
        if rows.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {rows.shape[1:]} written to an array of rows {self.row_shape}")
        self._file.write(_as_bytes(rows))
        self.n_rows += len(rows)

    def finish(self) -> np.ndarray:
        shape = (self.n_rows, *self.row_shape)
        try:
            if math.prod(shape) == 0 or self.dtype.itemsize == 0:
                return np.empty(shape, dtype=self.dtype)
            self._file.flush()
            return np.memmap(self._file, dtype=self.dtype, mode="r", shape=shape)
        finally:
            self._file.close()  # the map keeps its own handle on the file

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ArrayWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def converted(
    x: np.ndarray,
    dtype,
    *,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
    check: Callable[[np.ndarray, int], None] | None = None,
) -> np.ndarray:
    """x as dtype (after transform, if given), converted a block at a time into a temporary
    file; check(block, index of its first row) sees each converted block first. An x that is
    already a file of that dtype is only checked and comes back as it is: nothing is copied."""
    dtype = np.dtype(dtype)
    as_is = transform is None and x.dtype == dtype and x.flags.c_contiguous and _mapping(x) is not None
    writer = None
    try:
        start = 0
        for block in blocks(x):
            block = transform(block) if transform else block.astype(dtype, copy=False)
            if check:
                check(block, start)
            if not as_is:
                writer = writer or ArrayWriter(dtype, block.shape[1:])
                writer.write(block)
            start += len(block)
        if as_is:
            return x
        return writer.finish() if writer else np.empty((0, *x.shape[1:]), dtype=dtype)
    finally:
        if writer:
            writer.close()


def write_npz(
    fileobj: BinaryIO, members: dict[str, tuple[np.ndarray, np.ndarray | None]], *, compresslevel: int = 1
) -> None:
    """A compressed .npz written a block at a time, at level 1: three times faster than numpy's default for a fifth
    more bytes, which keeps a large upload within the request timeout."""
    with zipfile.ZipFile(fileobj, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel,
                         allowZip64=True) as archive:
        for name, (x, indices) in members.items():
            n = len(x) if indices is None else len(indices)
            header = {
                "descr": np.lib.format.dtype_to_descr(x.dtype),
                "fortran_order": False,
                "shape": (n, *x.shape[1:]),
            }
            nbytes = n * math.prod(x.shape[1:]) * x.dtype.itemsize
            with archive.open(f"{name}.npy", "w", force_zip64=nbytes > 2**31) as member:
                np.lib.format.write_array_header_1_0(member, header)
                for part in blocks(x, indices):
                    member.write(_as_bytes(part))


def strings_as_arrays(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Texts as UTF-8 bytes end to end plus where each ends: no pickles, and as large as the texts, where a fixed-width
    array grows with the longest one."""
    encoded = [text.encode("utf-8") for text in texts]
    return (np.frombuffer(b"".join(encoded), dtype=np.uint8),
            np.cumsum([len(item) for item in encoded], dtype=np.int64))


def strings_from_arrays(data: np.ndarray, ends: np.ndarray) -> list[str]:
    raw = np.asarray(data, dtype=np.uint8).tobytes()
    starts = [0, *(int(end) for end in ends[:-1])]
    return [raw[start:int(end)].decode("utf-8") for start, end in zip(starts, ends, strict=True)]
