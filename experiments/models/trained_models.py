"""Models handed to users (retrained, promoted or ensembles), their epochs, files and cached predictions."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from experiments.models.artifacts import Artifact
from experiments.models.datasets import Dataset
from experiments.models.jobs import Job
from experiments.models.studies import Study, Trial
from experiments.models.teams import Team


class TrainedModel(Job):
    """A model made from a trial's configuration (retrained on train+validation, or its checkpoint promoted) or an
    ensemble, with a name of its own whose remakes count `version`."""

    class Kind(models.TextChoices):
        SINGLE = "single", "Single model"
        ENSEMBLE = "ensemble", "Ensemble"

    class Method(models.TextChoices):
        RETRAIN = "retrain", "Retrained on train+validation"
        PROMOTE = "promote", "Promoted trial checkpoint"
        MEAN = "mean", "Ensemble: mean"
        NELDER_MEAD = "nelder_mead", "Ensemble: weights by Nelder–Mead"
        GREEDY = "greedy", "Ensemble: greedy selection"
        STACKING = "stacking", "Ensemble: stacking (regularised meta-learner)"

    class EpochSource(models.TextChoices):
        DETECT = "detect", "Detected again (EarlyStopping on val_loss, patience 10)"
        RECORDED = "recorded", "The trial's recorded best epoch"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="trained_models")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.SINGLE)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="trained_models")
    # A single model's lineage; an ensemble's is its members.
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.PROTECT, related_name="trained_models")
    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.PROTECT, related_name="trained_models")
    name = models.SlugField(max_length=80)
    version = models.PositiveIntegerField()
    method = models.CharField(max_length=12, choices=Method.choices)
    greedy_rounds = models.PositiveIntegerField(null=True, blank=True)
    # An ensemble's report: weights, metrics beside the mean and the best member, correlations.
    report = models.JSONField(default=dict, blank=True)
    epoch_source = models.CharField(max_length=10, choices=EpochSource.choices, blank=True)
    epoch_cap = models.PositiveIntegerField(default=100)
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    compute = models.JSONField(default=dict, blank=True)
    seed = models.IntegerField()
    hyperparameters = models.JSONField(default=dict)
    epochs = models.PositiveIntegerField(null=True, blank=True)
    val_metrics = models.JSONField(default=dict, blank=True)
    test_metrics = models.JSONField(default=dict, blank=True)
    # Input and output tensors of the exported model, and the packages that made it.
    signature = models.JSONField(default=dict, blank=True)
    versions = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name", "version"], name="model_version_unique_in_team")
        ]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def is_ensemble(self) -> bool:
        return self.kind == self.Kind.ENSEMBLE


class EnsembleMember(models.Model):
    """A member of an ensemble: a trained model, or a trial's checkpoint as is."""

    ensemble = models.ForeignKey(TrainedModel, on_delete=models.CASCADE, related_name="members")
    position = models.PositiveIntegerField()
    model = models.ForeignKey(TrainedModel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    trial = models.ForeignKey(Trial, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    weight = models.FloatField(null=True, blank=True)
    val_metrics = models.JSONField(default=dict, blank=True)
    test_metrics = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["ensemble", "position"], name="one_member_per_position"),
            models.CheckConstraint(condition=models.Q(model__isnull=False) ^ models.Q(trial__isnull=False),
                                   name="member_is_a_model_or_a_trial"),
        ]

    @property
    def label(self) -> str:
        if self.model_id:
            return str(self.model)
        return f"{self.trial.study.name} trial {self.trial.trial_id}"


class CachedPredictions(models.Model):
    """A member's predictions on one split, computed once and reused by every ensemble that
    includes it. `key` names the source: "model:<id>:test", "trial:<id>:val"."""

    key = models.CharField(max_length=100, unique=True)
    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="+")
    created = models.DateTimeField(default=timezone.now)


class TrainedModelEpoch(models.Model):
    class Phase(models.TextChoices):
        BEST_EPOCH = "best_epoch", "Best-epoch detection (train, validated)"
        RETRAIN = "retrain", "Retraining (train+validation)"

    model = models.ForeignKey(TrainedModel, on_delete=models.CASCADE, related_name="epoch_rows")
    phase = models.CharField(max_length=10, choices=Phase.choices)
    epoch = models.PositiveIntegerField()
    metrics = models.JSONField(default=dict)

    class Meta:
        ordering = ["phase", "epoch"]
        constraints = [models.UniqueConstraint(fields=["model", "phase", "epoch"], name="one_row_per_model_epoch")]


class ModelFile(models.Model):
    """One downloadable format of a trained model."""

    class Format(models.TextChoices):
        KERAS = "keras", "Keras (.keras)"
        SAVEDMODEL = "savedmodel", "SavedModel for TF Serving (.zip)"
        TFLITE = "tflite", "TFLite, float32"
        TFLITE_INT8 = "tflite_int8", "TFLite, dynamic-range int8"

    model = models.ForeignKey(TrainedModel, on_delete=models.CASCADE, related_name="files")
    format = models.CharField(max_length=12, choices=Format.choices)
    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["model", "format"], name="one_file_per_format")]
