"""Re-runs of finished trials (same seed and settings), to see how close a result comes."""

from django.conf import settings
from django.db import models

from experiments.models.jobs import Job
from experiments.models.studies import Trial


class TrialRerun(Job):
    """A finished trial's configuration trained again (same seed, settings, split) to see how close it comes; beside
    the search, so the tuner never hears of it."""

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="reruns")
    # 1, 2, ... per trial, for labels.
    number = models.PositiveIntegerField()
    seed = models.IntegerField()
    score = models.FloatField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    compute = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["trial", "number"]
        constraints = [models.UniqueConstraint(fields=["trial", "number"], name="one_rerun_per_number")]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.trial} re-run {self.number}"


class TrialRerunEpoch(models.Model):
    rerun = models.ForeignKey(TrialRerun, on_delete=models.CASCADE, related_name="epochs")
    execution = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField()
    metrics = models.JSONField(default=dict)

    class Meta:
        ordering = ["execution", "epoch"]
        constraints = [
            models.UniqueConstraint(fields=["rerun", "execution", "epoch"], name="one_row_per_rerun_epoch")
        ]
