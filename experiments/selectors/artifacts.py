"""Artifacts read back: a stored file's bytes, verified against the sha256 recorded when it was
saved, streamed, copied to a local path or read whole."""

import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from django.core.files.storage import storages

from experiments.errors import TuneboardError
from experiments.models import Artifact

READ_BLOCK = 1024 * 1024


class ArtifactCorrupted(TuneboardError):
    """The stored bytes no longer match the sha256 recorded when they were saved."""


class ArtifactMissing(TuneboardError):
    pass


def artifact_storage():
    return storages["artifacts"]


def artifact_iter_chunks(*, artifact: Artifact) -> Iterator[bytes]:
    """Stream the stored bytes; raises ArtifactCorrupted at the end if the hash differs."""
    try:
        handle = artifact_storage().open(artifact.storage_name, "rb")
    except FileNotFoundError as exc:
        raise ArtifactMissing(f"The file of {artifact} is missing from storage.") from exc
    digest = hashlib.sha256()
    with handle:
        while block := handle.read(READ_BLOCK):
            digest.update(block)
            yield block
    if digest.hexdigest() != artifact.sha256:
        raise ArtifactCorrupted(
            f"The stored file of {artifact} does not match its recorded sha256; refusing to use it."
        )


def artifact_verify(*, artifact: Artifact) -> None:
    for _ in artifact_iter_chunks(artifact=artifact):
        pass


def artifact_copy_to_path(*, artifact: Artifact, path: Path) -> Path:
    """Write a verified copy to a local path (a worker needs real files for Keras)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "wb") as out:
            for block in artifact_iter_chunks(artifact=artifact):
                out.write(block)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    shutil.move(partial, path)
    return path


def artifact_read_bytes(*, artifact: Artifact) -> bytes:
    return b"".join(artifact_iter_chunks(artifact=artifact))
