"""A Django Storage that keeps files in PostgreSQL as ordered chunks, so a worker on another host needs only
PostgreSQL and Redis and no side holds a whole file in memory."""

import io

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import Storage
from django.db import IntegrityError, transaction
from django.utils.deconstruct import deconstructible


class _ChunkReader(io.RawIOBase):
    """Reads a stored blob sequentially, fetching one chunk per query."""

    def __init__(self, blob_id: int, size: int):
        self._blob_id = blob_id
        self._size = size
        self._index = 0
        self._buffer = b""
        self._position = 0

    def readable(self) -> bool:
        return True

    def _next_chunk(self) -> bytes:
        from experiments.models import StoredChunk

        row = StoredChunk.objects.filter(blob_id=self._blob_id, index=self._index).values_list("data", flat=True)
        data = row.first()
        if data is None:
            return b""
        self._index += 1
        return bytes(data)

    def readinto(self, buffer) -> int:
        if not self._buffer:
            self._buffer = self._next_chunk()
            if not self._buffer:
                return 0
        n = min(len(buffer), len(self._buffer))
        buffer[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        self._position += n
        return n


@deconstructible
class DatabaseStorage(Storage):
    def get_available_name(self, name: str, max_length: int | None = None) -> str:
        """Checked by the INSERT in _save instead of a lookup before it: artifact names carry a
        uuid4, so a clash is rare and costs a retry, not a query on every save."""
        if max_length is not None and len(name) > max_length:
            return super().get_available_name(name, max_length=max_length)
        return name

    def _save(self, name: str, content) -> str:
        try:
            with transaction.atomic():  # a savepoint: a clash leaves the caller's transaction usable
                return self._write(name, content)
        except IntegrityError:
            if self._blob(name) is None:
                raise
            return self._write(super().get_available_name(name), content)  # the name is taken

    def _blob(self, name: str):
        from experiments.models import StoredBlob

        return StoredBlob.objects.filter(name=name).first()

    def _write(self, name: str, content) -> str:
        from experiments.models import StoredBlob, StoredChunk

        chunk_bytes = settings.ARTIFACT_CHUNK_BYTES
        with transaction.atomic():
            blob = StoredBlob.objects.create(name=name, size=getattr(content, "size", 0) or 0)
            size = 0
            pending = b""
            index = 0
            if hasattr(content, "seek"):
                content.seek(0)
            for piece in content.chunks(chunk_size=chunk_bytes):
                pending += piece
                while len(pending) >= chunk_bytes:
                    StoredChunk.objects.create(blob=blob, index=index, data=pending[:chunk_bytes])
                    size += chunk_bytes
                    pending = pending[chunk_bytes:]
                    index += 1
            if pending:
                StoredChunk.objects.create(blob=blob, index=index, data=pending)
                size += len(pending)
            if blob.size != size:
                blob.size = size
                blob.save(update_fields=["size"])
        return name

    def _open(self, name: str, mode: str = "rb") -> File:
        if "w" in mode or "a" in mode:
            raise ValueError("DatabaseStorage files are write-once; use save().")
        blob = self._blob(name)
        if blob is None:
            raise FileNotFoundError(f"No stored file named {name!r}.")
        reader = io.BufferedReader(_ChunkReader(blob.id, blob.size), buffer_size=settings.ARTIFACT_CHUNK_BYTES)
        return File(reader, name=name)

    def exists(self, name: str) -> bool:
        from experiments.models import StoredBlob

        return StoredBlob.objects.filter(name=name).exists()

    def delete(self, name: str) -> None:
        from experiments.models import StoredBlob

        StoredBlob.objects.filter(name=name).delete()

    def size(self, name: str) -> int:
        blob = self._blob(name)
        if blob is None:
            raise FileNotFoundError(f"No stored file named {name!r}.")
        return blob.size

    def listdir(self, path: str):
        from experiments.models import StoredBlob

        prefix = path.rstrip("/") + "/" if path else ""
        names = StoredBlob.objects.filter(name__startswith=prefix).values_list("name", flat=True)
        files = [n[len(prefix):] for n in names if "/" not in n[len(prefix):]]
        dirs = sorted({n[len(prefix):].split("/", 1)[0] for n in names if "/" in n[len(prefix):]})
        return dirs, files
