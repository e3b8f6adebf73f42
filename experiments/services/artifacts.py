"""Artifacts written: files of the domain in the configured storage, each with a recorded sha256
(reading them back, verified, is selectors/artifacts.py)."""

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from django.core.files import File
from django.db import transaction
from django.utils.text import get_valid_filename

from experiments.models import Artifact, Team
from experiments.selectors.artifacts import READ_BLOCK
from experiments.selectors.artifacts import artifact_storage as _storage

log = logging.getLogger(__name__)
# The kinds artifact_create takes, for callers that never import the models (workers).
ArtifactKind = Artifact.Kind


def _sha256_of(fileobj: BinaryIO) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    fileobj.seek(0)
    while block := fileobj.read(READ_BLOCK):
        digest.update(block)
        size += len(block)
    fileobj.seek(0)
    return digest.hexdigest(), size


def artifact_create(*, team: Team, kind: str, filename: str, fileobj: BinaryIO) -> Artifact:
    sha256, size = _sha256_of(fileobj)
    safe = get_valid_filename(filename) or "file"
    storage_name = f"team-{team.id}/{kind}/{uuid.uuid4().hex}-{safe}"
    # One transaction for the stored bytes (in the database storage) and the row: one commit.
    with transaction.atomic():
        try:
            stored_name = _storage().save(storage_name, File(fileobj, name=safe))
        except BaseException:
            _delete_stored(storage_name)  # a file storage leaves what it wrote before failing
            raise
        try:
            return Artifact.objects.create(
                team=team, kind=kind, filename=safe, storage_name=stored_name, size=size, sha256=sha256
            )
        except BaseException:
            _delete_stored(stored_name)
            raise


@contextmanager
def artifact_files_removed_on_error() -> Iterator[Callable[[Artifact], Artifact]]:
    """For a block creating artifacts in a transaction: a raise deletes their stored files too, since a folder of files
    has no transaction to roll back."""
    created: list[str] = []

    def remember(artifact: Artifact) -> Artifact:
        created.append(artifact.storage_name)
        return artifact

    try:
        yield remember
    except BaseException:
        for name in created:
            _delete_stored(name)
        raise


def _delete_stored(name: str) -> None:
    try:
        _storage().delete(name)
    except Exception:  # already gone, or the storage is what failed: nothing more to do here
        log.warning("could not delete the stored file %s", name, exc_info=True)


def artifact_create_from_path(*, team: Team, kind: str, path: Path, filename: str | None = None) -> Artifact:
    with open(path, "rb") as handle:
        return artifact_create(team=team, kind=kind, filename=filename or Path(path).name, fileobj=handle)


def artifacts_delete(*, artifacts) -> None:
    """Remove artifacts nothing refers to (a superseded worker's files): the rows, then the
    stored bytes. Storage that is already gone is fine."""
    for artifact in artifacts:
        name = artifact.storage_name
        artifact.delete()
        try:
            _storage().delete(name)
        except FileNotFoundError:
            pass
