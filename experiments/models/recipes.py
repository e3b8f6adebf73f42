"""Ensemble recipes: saved rules that pick an ensemble's members and build it when asked or when a source changes;
each build is a RecipeRun whose ensemble is an ordinary TrainedModel."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from experiments.models.datasets import Dataset
from experiments.models.registry import ModelVersion
from experiments.models.studies import Study
from experiments.models.teams import Team
from experiments.models.trained_models import TrainedModel


class EnsembleRecipe(models.Model):
    class GroupBy(models.TextChoices):
        HYPERMODEL = "hypermodel", "hypermodel"
        STUDY = "study", "study"

    class MembersAs(models.TextChoices):
        CHECKPOINT = "checkpoint", "Search checkpoints (trained on train only)"
        RETRAINED = "retrained", "Retrained ×1.2 on train+validation (retrained in the run when missing)"
        EXISTING = "existing", "Existing models only (no training in the run)"

    class Method(models.TextChoices):
        MEAN = "mean", "Mean"
        NELDER_MEAD = "nelder_mead", "Weights by Nelder–Mead"
        GREEDY = "greedy", "Greedy selection with replacement"
        STACKING = "stacking", "Stacking (regularised meta-learner)"

    class Trigger(models.TextChoices):
        MANUAL = "manual", "On demand"
        STUDY_COMPLETED = "study_completed", "Whenever a source study completes"
        NEW_CANDIDATE = "new_candidate", "Whenever a new model would enter the candidates"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="ensemble_recipes")
    name = models.SlugField(max_length=80)
    description = models.TextField(blank=True)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="ensemble_recipes")
    # Sources: these studies, and/or every study of the dataset carrying `source_tag`.
    source_studies = models.ManyToManyField(Study, blank=True, related_name="ensemble_recipes")
    source_tag = models.CharField(max_length=40, blank=True)
    # Candidates: the top `top_k` trials of each source study by `metric`, at most `per_group_max`
    # per hypermodel (or per study), pruned trials in or out, an optional cap on the pairwise
    # correlation of validation predictions.
    metric = models.CharField(max_length=50, default="val_loss")
    direction = models.CharField(max_length=3, choices=Study.Direction.choices, default=Study.Direction.MIN)
    top_k = models.PositiveIntegerField(default=3)
    per_group_max = models.PositiveIntegerField(default=1)
    group_by = models.CharField(max_length=10, choices=GroupBy.choices, default=GroupBy.HYPERMODEL)
    include_pruned = models.BooleanField(default=False)
    correlation_cap = models.FloatField(null=True, blank=True)
    members_as = models.CharField(max_length=10, choices=MembersAs.choices, default=MembersAs.RETRAINED)
    method = models.CharField(max_length=12, choices=Method.choices, default=Method.NELDER_MEAD)
    greedy_rounds = models.PositiveIntegerField(default=50)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.MANUAL)
    # Then: register each run's ensemble under this registered model's name (created at the first
    # registration) and move `alias` to it only when it beats the alias's version on validation.
    register_as = models.SlugField(max_length=80, blank=True)
    alias = models.SlugField(max_length=40, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    # The member its triggered runs act for (their retrains, ensembles and registry changes are
    # theirs): its creator, until an owner takes it over. Only while they are an owner or editor
    # of the team do triggers start runs; `last_skipped*` is the last trigger that started nothing
    # and why: they were not, or fewer than two picks (services/recipe_triggers.py).
    acts_for = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+")
    last_skipped = models.TextField(blank=True)
    last_skipped_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="recipe_name_unique_in_team")]

    def __str__(self) -> str:
        return self.name


class RecipeRun(models.Model):
    class Status(models.TextChoices):
        WAITING = "waiting", "Waiting for members (retraining)"
        BUILDING = "building", "Building the ensemble"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"

    recipe = models.ForeignKey(EnsembleRecipe, on_delete=models.CASCADE, related_name="runs")
    number = models.PositiveIntegerField()
    trigger = models.CharField(max_length=16, choices=EnsembleRecipe.Trigger.choices)
    # What started it, once: "study:<id>" for a completion, "candidates:<hash>" for a new candidate
    # set. Unique per recipe, so a duplicate delivery of the same event starts nothing more.
    trigger_key = models.CharField(max_length=100, blank=True)
    reason = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.WAITING)
    # The rule as it was applied: every candidate considered, picked or not, and why.
    rule = models.JSONField(default=dict, blank=True)
    candidates = models.JSONField(default=list, blank=True)
    # Member keys in order ("model:<id>", "trial:<id>"), and the retrains the run waits for.
    members = models.JSONField(default=list, blank=True)
    waiting_on = models.ManyToManyField(TrainedModel, blank=True, related_name="+")
    ensemble = models.ForeignKey(TrainedModel, null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="recipe_runs")
    # Champion/challenger: this run's validation figure against the alias's version's, and the rule.
    comparison = models.JSONField(default=dict, blank=True)
    registered = models.ForeignKey(ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    promoted = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    # The member the run acts for: whoever clicked Run now, or the recipe's acts_for when a trigger
    # started it. Its build and registry changes are theirs, and happen only while they may act.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["recipe", "number"], name="recipe_run_number_unique"),
            models.UniqueConstraint(fields=["recipe", "trigger_key"], condition=~models.Q(trigger_key=""),
                                    name="recipe_run_trigger_once"),
        ]

    def __str__(self) -> str:
        return f"{self.recipe} run {self.number}"
