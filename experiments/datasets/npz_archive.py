"""An uploaded .npz read as the untrusted zip it is: headers checked before anything is unpacked, then one member
at a time into a mapped temporary file (numpy.load would unpack all at once)."""

from __future__ import annotations

import math
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from experiments.datasets.core import DatasetError

_NPY_MAGIC = b"\x93NUMPY"
_READ_BYTES = 1024 * 1024
# What numpy.savez and numpy.savez_compressed write. Deflate cannot shrink data more than
# about 1,032 times, so the limit on the unpacked size is also a limit on the work; bzip2
# and lzma members (which numpy never writes) could ask for far more from a tiny file.
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
_SAVE_HINT = "Save the arrays with numpy.savez(path, x=..., y=...) and upload that file."


@dataclass(frozen=True)
class ArrayHeader:
    """What a member's .npy header declares."""

    key: str
    info: zipfile.ZipInfo
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)


class NpzArchive:
    def __init__(self, file: BinaryIO):
        file.seek(0)
        magic = file.read(len(_NPY_MAGIC))
        file.seek(0)
        if magic == _NPY_MAGIC:
            raise DatasetError(
                "This is a single NumPy array (.npy), not an .npz archive. Save both arrays with "
                "numpy.savez(path, x=..., y=...) and upload that file."
            )
        try:
            self._zip = zipfile.ZipFile(file)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
            raise DatasetError(f"The file is not a valid .npz archive. {_SAVE_HINT}") from None
        # numpy.load's names: the member name without ".npy".
        self._members = {info.filename.removesuffix(".npy"): info for info in self._zip.infolist()}

    @property
    def keys(self) -> list[str]:
        return list(self._members)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def header(self, key: str) -> ArrayHeader:
        info = self._members[key]
        if info.flag_bits & 0x1:
            raise DatasetError(
                f"The array {key!r} in the .npz file is encrypted. Upload an archive without a password."
            )
        if info.compress_type not in _METHODS:
            raise DatasetError(
                f"The array {key!r} in the .npz file is compressed in a way numpy never writes "
                f"(zip method {info.compress_type}). {_SAVE_HINT}"
            )
        try:
            with self._zip.open(info) as stream:
                version = np.lib.format.read_magic(stream)
                if version == (1, 0):
                    shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(stream)
                elif version == (2, 0):
                    shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(stream)
                else:
                    raise ValueError(f"npy format {version}")
                data_offset = stream.tell()
        except Exception:  # numpy raises ValueError for a bad header; zipfile BadZipFile, zlib.error...
            raise _unreadable(key) from None
        if dtype.hasobject:
            raise DatasetError(
                f"The array {key!r} in the .npz file could not be read: it holds Python objects, "
                "which would have to be unpickled. Save plain numeric (or string) arrays."
            )
        header = ArrayHeader(key, info, tuple(int(d) for d in shape), dtype, bool(fortran_order), data_offset)
        if info.file_size != data_offset + header.nbytes:
            raise _unreadable(key)  # the zip's directory and the array's header disagree
        return header

    def unpack(self, header: ArrayHeader) -> np.ndarray:
        """The array, unpacked a block at a time into an anonymous temporary file and mapped
        read-only (read it with arrays.blocks, which keeps resident memory small)."""
        if header.nbytes == 0:
            return np.empty(header.shape, dtype=header.dtype)
        spool = tempfile.TemporaryFile(prefix="tuneboard-npz-")
        try:
            written = 0
            with self._zip.open(header.info) as stream:
                stream.read(header.data_offset)
                while block := stream.read(_READ_BYTES):
                    spool.write(block)
                    written += len(block)
            if written != header.nbytes:
                raise _unreadable(header.key)
            spool.flush()
            return np.memmap(spool, dtype=header.dtype, mode="r", shape=header.shape,
                             order="F" if header.fortran_order else "C")
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError):  # a bad CRC, a truncated stream
            raise _unreadable(header.key) from None
        finally:
            spool.close()  # the map keeps its own handle on the file


def _unreadable(key: str) -> DatasetError:
    return DatasetError(
        f"The array {key!r} in the .npz file could not be read: it is damaged. {_SAVE_HINT}"
    )
