"""Cached predictions stored: a member's predictions on one split ("model:<id>:test"), kept once
as an artifact for every ensemble that includes it (read back by selectors/prediction_cache.py)."""

from typing import BinaryIO

from django.db import IntegrityError, transaction

from experiments.models import Artifact, CachedPredictions, Team
from experiments.services.artifacts import artifact_create


def cached_predictions_store(*, team: Team, key: str, fileobj: BinaryIO) -> None:
    try:
        with transaction.atomic():
            artifact = artifact_create(team=team, kind=Artifact.Kind.PREDICTIONS, filename=f"{key}.npz",
                                       fileobj=fileobj)
            CachedPredictions.objects.create(key=key, artifact=artifact)
    except IntegrityError:
        pass  # another worker cached the same member meanwhile; its copy is identical
