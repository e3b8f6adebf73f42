"""Cached predictions: a member's predictions on one split, stored once as an artifact and
reused by every ensemble that includes the member. `key` names the source
("model:<id>:test", "trial:<id>:val"); the stored bytes are the worker's own format."""

from typing import BinaryIO

from django.db import IntegrityError, transaction

from experiments.models import Artifact, CachedPredictions, Team
from experiments.services.artifacts import artifact_create, artifact_read_bytes


def cached_predictions_read(*, key: str) -> bytes | None:
    row = CachedPredictions.objects.filter(key=key).select_related("artifact").first()
    return None if row is None else artifact_read_bytes(artifact=row.artifact)


def cached_predictions_store(*, team: Team, key: str, fileobj: BinaryIO) -> None:
    try:
        with transaction.atomic():
            artifact = artifact_create(team=team, kind=Artifact.Kind.PREDICTIONS, filename=f"{key}.npz",
                                       fileobj=fileobj)
            CachedPredictions.objects.create(key=key, artifact=artifact)
    except IntegrityError:
        pass  # another worker cached the same member meanwhile; its copy is identical
