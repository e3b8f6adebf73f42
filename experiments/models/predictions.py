"""Batch predictions: inputs without labels, uploaded for a trained model (or an ensemble, or a
registry alias resolved when the job is requested), predicted on the model's queue."""

from django.conf import settings
from django.db import models

from experiments.models.artifacts import Artifact
from experiments.models.jobs import Job
from experiments.models.registry import ModelVersion
from experiments.models.teams import Team
from experiments.models.trained_models import TrainedModel


class PredictionJob(Job):
    """Inputs parsed and validated in the web process (by the dataset readers, against the
    model's dataset) and stored as an NPZ of raw inputs; a worker of the model's queue predicts
    them in batches, reporting rows done, and stores the predictions as CSV and NPZ."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="prediction_jobs")
    model = models.ForeignKey(TrainedModel, on_delete=models.PROTECT, related_name="prediction_jobs")
    # How the model was named when asked for: through an alias ("<registered>@<alias>"), the
    # version it resolved to, or "" for a model asked for directly.
    requested_as = models.CharField(max_length=140, blank=True)
    registry_version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.SET_NULL,
                                         related_name="+")
    # Predicted by one of the model's quantized variants (asked for, or the registry version it resolved to).
    variant = models.ForeignKey("experiments.ModelVariant", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="prediction_jobs")
    input_filename = models.CharField(max_length=255, blank=True)
    # The parsed raw inputs ("x" in an NPZ), what the worker reads.
    inputs = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="+")
    rows = models.PositiveIntegerField()
    rows_done = models.PositiveIntegerField(default=0)
    # A "Try it" request from the model page: a few rows, shown on the page rather than downloaded.
    is_try = models.BooleanField(default=False)
    predictions_csv = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    predictions_npz = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The first rows' predictions (labels and probabilities, or values), for the page.
    preview = models.JSONField(default=list, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"prediction {self.pk} with {self.model}"
