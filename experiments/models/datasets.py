"""Datasets a team uploaded or picked from the bundled ones."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from experiments.models.artifacts import Artifact
from experiments.models.teams import Team


class Dataset(models.Model):
    class Source(models.TextChoices):
        BUNDLED = "bundled", "Bundled"
        UPLOAD = "upload", "Upload"

    class Task(models.TextChoices):
        CLASSIFICATION = "classification", "Classification"
        REGRESSION = "regression", "Regression"

    class Kind(models.TextChoices):
        TABULAR = "tabular", "Tabular"
        IMAGE = "image", "Images"
        TEXT = "text", "Text"
        SEQUENCE = "sequence", "Sequences"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=100)
    source = models.CharField(max_length=10, choices=Source.choices)
    bundled_name = models.CharField(max_length=50, blank=True)
    file_format = models.CharField(max_length=10, blank=True)
    target_column = models.CharField(max_length=200, blank=True)
    task = models.CharField(max_length=20, choices=Task.choices)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TABULAR)
    # What the parser found for this kind: image size and colour mode, files skipped and why,
    # text column, window and horizon...
    details = models.JSONField(default=dict, blank=True)
    n_rows = models.IntegerField()
    n_features = models.IntegerField()
    input_shape = models.JSONField(default=list)
    feature_names = models.JSONField(default=list)
    classes = models.JSONField(default=list, blank=True)
    class_counts = models.JSONField(default=dict, blank=True)
    preview = models.JSONField(default=list, blank=True)
    val_fraction = models.FloatField()
    test_fraction = models.FloatField()
    split_seed = models.IntegerField()
    split_sizes = models.JSONField(default=dict)
    upload = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    arrays = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="dataset_name_unique_in_team")]

    def __str__(self) -> str:
        return self.name

    @property
    def n_classes(self) -> int:
        return len(self.classes)
