"""Cached predictions read back: a member's predictions on one split, stored once by a worker
(services/prediction_cache.py) and reused by every ensemble that includes the member."""

from experiments.models import CachedPredictions
from experiments.selectors.artifacts import artifact_read_bytes


def cached_predictions_read(*, key: str) -> bytes | None:
    row = CachedPredictions.objects.filter(key=key).select_related("artifact").first()
    return None if row is None else artifact_read_bytes(artifact=row.artifact)
