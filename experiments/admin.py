from django.contrib import admin

from experiments import models


@admin.register(models.Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created"]
    search_fields = ["name"]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]


@admin.register(models.Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "task", "n_rows", "n_features", "source", "created"]
    list_filter = ["team", "task", "source"]


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "tuner", "status", "max_trials", "queue", "created"]
    list_filter = ["team", "status", "tuner", "queue"]
    readonly_fields = ["oracle_state", "oracle_version"]


@admin.register(models.Trial)
class TrialAdmin(admin.ModelAdmin):
    list_display = ["study", "trial_id", "attempt", "status", "score", "best_epoch", "worker_host", "started"]
    list_filter = ["status"]
    readonly_fields = ["kt_state"]


@admin.register(models.TrialEpoch)
class TrialEpochAdmin(admin.ModelAdmin):
    list_display = ["trial", "execution", "epoch", "created"]


@admin.register(models.Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["filename", "team", "kind", "size", "sha256", "created"]
    list_filter = ["kind", "team"]


@admin.register(models.Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["name", "hostname", "pid", "last_heartbeat"]


@admin.register(models.StoredBlob)
class StoredBlobAdmin(admin.ModelAdmin):
    list_display = ["name", "size", "created"]


admin.site.register(models.StoredChunk)


class ModelFileInline(admin.TabularInline):
    model = models.ModelFile
    extra = 0
    readonly_fields = ["format", "artifact"]


@admin.register(models.TrainedModel)
class TrainedModelAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "team", "method", "status", "study", "created"]
    list_filter = ["team", "status", "method"]
    search_fields = ["name"]
    inlines = [ModelFileInline]
