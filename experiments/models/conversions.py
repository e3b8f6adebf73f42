"""Conversions: the serving formats that need TensorFlow (SavedModel, TFLite), made from a
model's `.keras` file on a TensorFlow worker after the model trained on one without it (JAX)."""

from django.db import models

from experiments.models.jobs import Job
from experiments.models.trained_models import TrainedModel


class ModelConversion(Job):
    """A follow-up job of a TrainedModel that trained on a worker without TensorFlow: a worker of
    the cpu queue (TensorFlow) loads the `.keras` file and writes the formats it could not. Its
    lifecycle is a job's (services/jobs.py); the model is usable (.keras) all the while."""

    model = models.ForeignKey(TrainedModel, on_delete=models.CASCADE, related_name="conversions")
    # What it makes: ModelFile formats.
    formats = models.JSONField(default=list)
    # Formats the converter could not make, with the reason (as TrainedModel.signature["unavailable"]).
    unavailable = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["model", "id"]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.model} conversion {self.pk}"
