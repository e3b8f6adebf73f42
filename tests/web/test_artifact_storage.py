"""Artifacts in PostgreSQL: files are stored as ordered chunks and read back byte for byte;
every artifact carries its size and sha256, and bytes that no longer match are refused."""

import hashlib
import io
import os

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages

from experiments.models import Artifact, StoredBlob, StoredChunk
from experiments.selectors.artifacts import (
    ArtifactCorrupted,
    ArtifactMissing,
    artifact_copy_to_path,
    artifact_iter_chunks,
    artifact_read_bytes,
    artifact_verify,
)
from experiments.services.artifacts import artifact_create
from experiments.storage import DatabaseStorage

pytestmark = pytest.mark.django_db

CHUNK = 1024
SIZE = 5 * 1024 + 321  # five full chunks and a short last one


@pytest.fixture(autouse=True)
def database_artifacts(settings):
    settings.ARTIFACT_CHUNK_BYTES = CHUNK
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "experiments.storage.DatabaseStorage"},
    }
    assert isinstance(storages["artifacts"], DatabaseStorage)


@pytest.fixture
def data() -> bytes:
    return os.urandom(SIZE)


@pytest.fixture
def artifact(acme, data) -> Artifact:
    return artifact_create(
        team=acme,
        kind=Artifact.Kind.CHECKPOINT,
        filename="best epoch.keras",
        fileobj=io.BytesIO(data),
    )


def _chunks(artifact: Artifact):
    return StoredChunk.objects.filter(blob__name=artifact.storage_name).order_by("index")


def test_a_file_of_several_chunks_is_stored_and_read_back_identical(data):
    storage = DatabaseStorage()

    name = storage.save("team-1/test/random.bin", ContentFile(data))

    blob = StoredBlob.objects.get(name=name)
    chunks = list(blob.chunks.order_by("index"))
    assert [c.index for c in chunks] == list(range(6))
    assert [len(bytes(c.data)) for c in chunks] == [CHUNK] * 5 + [321]
    assert blob.size == storage.size(name) == SIZE
    assert storage.exists(name)
    with storage.open(name) as handle:
        assert handle.read() == data
    with storage.open(name) as handle:  # small reads across chunk boundaries
        pieces = iter(lambda: handle.read(700), b"")
        assert b"".join(pieces) == data


def test_a_file_of_exactly_whole_chunks_and_an_empty_file_read_back(data):
    storage = DatabaseStorage()
    whole = storage.save("whole.bin", ContentFile(data[: 3 * CHUNK]))
    empty = storage.save("empty.bin", ContentFile(b""))
    assert StoredChunk.objects.filter(blob__name=whole).count() == 3
    with storage.open(whole) as handle:
        assert handle.read() == data[: 3 * CHUNK]
    with storage.open(empty) as handle:
        assert handle.read() == b""


def test_the_same_name_is_not_overwritten(data):
    storage = DatabaseStorage()
    first = storage.save("same.bin", ContentFile(data))
    second = storage.save("same.bin", ContentFile(b"other bytes"))
    assert first != second
    with storage.open(first) as handle:
        assert handle.read() == data


def test_artifact_create_records_size_and_sha256(artifact, data):
    assert artifact.size == SIZE
    assert artifact.sha256 == hashlib.sha256(data).hexdigest()
    assert artifact.filename == "best_epoch.keras"
    assert artifact.storage_name.startswith(f"team-{artifact.team_id}/checkpoint/")
    assert _chunks(artifact).count() == 6
    assert artifact_read_bytes(artifact=artifact) == data
    artifact_verify(artifact=artifact)  # does not raise


def test_copy_to_path_writes_an_identical_file(artifact, data, tmp_path):
    path = artifact_copy_to_path(artifact=artifact, path=tmp_path / "model.keras")
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]


def _flip_one_byte(artifact):
    chunk = _chunks(artifact)[2]
    altered = bytearray(bytes(chunk.data))
    altered[17] ^= 0xFF
    chunk.data = bytes(altered)
    chunk.save()


def _truncate_last_chunk(artifact):
    chunk = _chunks(artifact).last()
    chunk.data = bytes(chunk.data)[:-1]
    chunk.save()


def _drop_a_middle_chunk(artifact):
    _chunks(artifact)[3].delete()


ALTERATIONS = {
    "one byte flipped": _flip_one_byte,
    "last chunk truncated": _truncate_last_chunk,
    "a middle chunk lost": _drop_a_middle_chunk,
}


@pytest.mark.parametrize("alteration", list(ALTERATIONS))
def test_altered_bytes_are_refused_when_read(artifact, alteration):
    ALTERATIONS[alteration](artifact)

    with pytest.raises(ArtifactCorrupted, match="does not match its recorded sha256"):
        for _ in artifact_iter_chunks(artifact=artifact):
            pass
    with pytest.raises(ArtifactCorrupted):
        artifact_verify(artifact=artifact)
    with pytest.raises(ArtifactCorrupted):
        artifact_read_bytes(artifact=artifact)


@pytest.mark.parametrize("alteration", list(ALTERATIONS))
def test_copy_to_path_of_altered_bytes_leaves_no_file_behind(artifact, alteration, tmp_path):
    ALTERATIONS[alteration](artifact)
    target = tmp_path / "model.keras"

    with pytest.raises(ArtifactCorrupted):
        artifact_copy_to_path(artifact=artifact, path=target)

    assert list(tmp_path.iterdir()) == []


def test_copy_to_path_of_altered_bytes_keeps_an_existing_good_file(artifact, tmp_path, data):
    target = artifact_copy_to_path(artifact=artifact, path=tmp_path / "model.keras")
    _flip_one_byte(artifact)

    with pytest.raises(ArtifactCorrupted):
        artifact_copy_to_path(artifact=artifact, path=target)

    assert target.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.keras"]


def test_a_missing_blob_raises_artifact_missing(artifact, tmp_path):
    StoredBlob.objects.filter(name=artifact.storage_name).delete()

    with pytest.raises(ArtifactMissing):
        next(artifact_iter_chunks(artifact=artifact))
    with pytest.raises(ArtifactMissing):
        artifact_verify(artifact=artifact)
    with pytest.raises(ArtifactMissing):
        artifact_read_bytes(artifact=artifact)
    with pytest.raises(ArtifactMissing):
        artifact_copy_to_path(artifact=artifact, path=tmp_path / "model.keras")
    assert list(tmp_path.iterdir()) == []
