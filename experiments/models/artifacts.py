"""Files: blobs kept in PostgreSQL as chunks, and the artifacts that point at them."""

from django.db import models
from django.utils import timezone

from experiments.models.teams import Team


class StoredBlob(models.Model):
    """A file kept in PostgreSQL by experiments.storage.DatabaseStorage, as ordered chunks."""

    name = models.CharField(max_length=255, unique=True)
    size = models.BigIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)


class StoredChunk(models.Model):
    blob = models.ForeignKey(StoredBlob, on_delete=models.CASCADE, related_name="chunks")
    index = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["blob", "index"], name="one_chunk_per_index")]


class Artifact(models.Model):
    """A file of the domain (dataset, checkpoint, model) in the artifact storage, with its hash."""

    class Kind(models.TextChoices):
        DATASET_UPLOAD = "dataset_upload", "Uploaded dataset file"
        DATASET_ARRAYS = "dataset_arrays", "Dataset splits"
        CHECKPOINT = "checkpoint", "Trial checkpoint"
        MODEL = "model", "Trained model"
        PREDICTIONS = "predictions", "Cached predictions"
        PREDICTION_INPUTS = "prediction_inputs", "Batch prediction inputs"
        BATCH_PREDICTIONS = "batch_predictions", "Batch predictions"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    filename = models.CharField(max_length=255)
    storage_name = models.CharField(max_length=255, unique=True)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.kind}:{self.filename}"
