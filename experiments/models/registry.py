"""The model registry: registered models whose versions are trained models registered explicitly, aliases that point
at versions with every move kept, and the serving-export jobs."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from experiments.models.datasets import Dataset
from experiments.models.jobs import Job
from experiments.models.teams import Team
from experiments.models.trained_models import TrainedModel


class RegisteredModel(models.Model):
    """A name a team serves under (TF Serving's model name). Its task, serving contract (input
    keys, shapes and dtypes; output keys) and dataset kind are fixed by its first version; a later
    version must serve under the same contract."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="registered_models")
    name = models.SlugField(max_length=80)
    description = models.TextField(blank=True)
    task = models.CharField(max_length=20, choices=Dataset.Task.choices)
    dataset_kind = models.CharField(max_length=10, choices=Dataset.Kind.choices)
    # Its serving contract (experiments/serving/contract.py), what every version serves under:
    # [{"name": "input_0", "shape": [null, 8, 8, 1], "dtype": "uint8"}, ...], the inputs by position
    # with the key TF Serving takes each under (rows made before keys were kept have no "name"),
    input_signature = models.JSONField(default=list)
    # and the output keys, ["output_0"] (empty on those older rows: they adopt their first version's).
    output_keys = models.JSONField(default=list)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="registered_model_name_unique_in_team")]

    def __str__(self) -> str:
        return self.name


class ModelVersion(models.Model):
    """One trained model (or ensemble) as version N of a registered model; N counts up from 1
    without gaps, as TF Serving's version folders do."""

    registered_model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    trained_model = models.ForeignKey(TrainedModel, on_delete=models.PROTECT, related_name="registry_versions")
    # Or one of its quantized variants (its signature is the model's): TF Serving loads the variant's SavedModel.
    variant = models.ForeignKey("experiments.ModelVariant", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="registry_versions")
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["registered_model", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["registered_model", "version"], name="one_model_version_per_number"),
            models.UniqueConstraint(fields=["registered_model", "trained_model"], condition=Q(variant__isnull=True),
                                    name="trained_model_registered_once_per_name"),
            models.UniqueConstraint(fields=["registered_model", "variant"], condition=Q(variant__isnull=False),
                                    name="variant_registered_once_per_name"),
        ]

    def __str__(self) -> str:
        return f"{self.registered_model.name} v{self.version}"

    @property
    def test_metrics(self) -> dict:
        """What this version scores on the test split: its variant's own figures when it is a quantized variant."""
        if self.variant_id:
            return ((self.variant.figures or {}).get("variant") or {}).get("metrics") or {}
        return self.trained_model.test_metrics


class ModelAlias(models.Model):
    """A label (`production`, `staging`, ...) pointing at one version of a registered model."""

    registered_model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="aliases")
    name = models.SlugField(max_length=40)
    version = models.ForeignKey(ModelVersion, on_delete=models.PROTECT, related_name="aliases")
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["registered_model", "name"]
        constraints = [models.UniqueConstraint(fields=["registered_model", "name"], name="one_alias_name_per_model")]

    def __str__(self) -> str:
        return f"{self.registered_model.name}@{self.name}"


class AliasMove(models.Model):
    """Every move of an alias, kept: who, when, from which version to which (None: the alias was
    created, or removed). A rollback is a move back to `from_version`."""

    registered_model = models.ForeignKey(RegisteredModel, on_delete=models.CASCADE, related_name="alias_moves")
    alias = models.SlugField(max_length=40)
    from_version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    to_version = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The move this one rolled back, when it is a rollback.
    rollback_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]


class ServingExport(Job):
    """A job writing the TF Serving layout of a team's registered models (`<name>/<version>/`
    SavedModels and a `models.config` with version labels) into the serving folder: requested on
    demand and whenever an alias moves. `report` says what it wrote, kept and removed."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="serving_exports")
    # What asked for it: "manual", "alias:<model>@<alias>", "command".
    reason = models.CharField(max_length=120, blank=True)
    report = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created"]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"serving export {self.pk} of {self.team}"
