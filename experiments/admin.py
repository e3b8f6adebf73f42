from django.contrib import admin

from experiments import models


class WrittenByWorkers(admin.ModelAdmin):
    """Rows the lifecycle services write (experiments/services/trial_claims.py, jobs.py):
    staff may read them and change only `editable`; results are never edited by hand, and
    rows are never added here."""

    editable: tuple[str, ...] = ()

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields if field.name not in self.editable]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(models.Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created"]
    search_fields = ["name"]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]


@admin.register(models.Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Invitations are made on the team page, where the link is shown once; here staff can
    read, shorten or withdraw them. The token's hash is useless to edit, so it is read-only."""

    list_display = ["email", "team", "role", "created_by", "created", "expires", "accepted_at"]
    list_filter = ["team", "role"]
    search_fields = ["email"]
    readonly_fields = ["token_hash", "created_by", "created", "accepted_at", "accepted_by"]

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(models.Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "task", "n_rows", "n_features", "source", "created"]
    list_filter = ["team", "task", "source"]


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "tuner", "status", "max_trials", "queue", "created"]
    list_filter = ["team", "status", "tuner", "queue"]
    # Start, cancel and budgets go through the pages (the lifecycle rules); the rest is state.
    readonly_fields = ["status", "message", "oracle_state", "oracle_version", "started", "finished",
                       "last_activity", "wakeups_pending", "last_wakeup", "wakeup_resends", "failures_counted_from",
                       "seeds", "seeds_used"]


@admin.register(models.Trial)
class TrialAdmin(WrittenByWorkers):
    list_display = ["study", "trial_id", "attempt", "status", "score", "best_epoch", "worker_host", "started"]
    list_filter = ["status"]
    editable = ("notes", "tags")  # people's annotations; the results stay as the worker wrote them


@admin.register(models.TrialEpoch)
class TrialEpochAdmin(WrittenByWorkers):
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
class TrainedModelAdmin(WrittenByWorkers):
    list_display = ["name", "version", "team", "method", "status", "study", "created"]
    list_filter = ["team", "status", "method"]
    search_fields = ["name"]
    inlines = [ModelFileInline]


@admin.register(models.TrialRerun)
class TrialRerunAdmin(WrittenByWorkers):
    list_display = ["trial", "number", "status", "score", "worker_host", "created"]
    list_filter = ["status"]
