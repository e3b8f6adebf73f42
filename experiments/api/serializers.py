"""What the API shows of each object (read side) and the bodies it accepts (write side).

Writes are validated by the same forms and services as the pages, so the messages match;
these input serializers only describe the bodies for the schema and refuse unknown fields."""

from django.urls import reverse
from rest_framework import serializers

from experiments.models import Dataset, Study, TrainedModel, Trial, TrialEpoch, TrialRerun
from experiments.selectors.ensembles import ensemble_members
from experiments.selectors.studies import PRUNED_TRAINED, pruning_savings, study_counts
from experiments.selectors.trial_reruns import trial_reruns
from experiments.selectors.trials import study_best_trial
from experiments.tuning.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.tuning.pruning_options import PRUNERS

MAX_ID = 2**63 - 1


def absolute(context, path: str) -> str:
    request = context.get("request")
    return request.build_absolute_uri(path) if request is not None else path


class DatasetSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = ["id", "url", "name", "source", "bundled_name", "file_format", "target_column", "task", "kind",
                  "details", "n_rows", "n_features", "input_shape", "feature_names", "classes", "class_counts",
                  "val_fraction", "test_fraction", "split_seed", "split_sizes", "created"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:dataset-detail", kwargs={"dataset_id": obj.id}))


class SeedSourceSerializer(serializers.Serializer):
    trial = serializers.IntegerField(help_text="The earlier trial's id.")
    study = serializers.IntegerField()
    number = serializers.IntegerField()
    url = serializers.CharField()


class TrialSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    seeded_from = serializers.SerializerMethodField(help_text="The earlier trial whose configuration this warm-start "
                                                              "seed runs again; null for the tuner's own trials.")

    class Meta:
        model = Trial
        fields = ["id", "url", "study", "trial_id", "number", "attempt", "status", "hyperparameters", "score",
                  "best_epoch", "metrics", "error", "worker_host", "worker_name", "started", "finished",
                  "duration_seconds", "compute", "environment", "notes", "tags", "seeded_from", "epochs_trained",
                  "pruning"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:trial-detail", kwargs={"study_id": obj.study_id,
                                                                           "trial_pk": obj.pk}))

    def get_seeded_from(self, obj) -> SeedSourceSerializer(allow_null=True):  # type: ignore[valid-type]
        source = obj.seeded_from
        if source is None:
            return None
        url = reverse("api:trial-detail", kwargs={"study_id": source.study_id, "trial_pk": source.pk})
        return {"trial": source.pk, "study": source.study_id, "number": source.number,
                "url": absolute(self.context, url)}


class DifferenceSerializer(serializers.Serializer):
    name = serializers.CharField(required=False)
    original = serializers.JSONField(allow_null=True)
    rerun = serializers.JSONField(allow_null=True)
    difference = serializers.FloatField(allow_null=True, help_text="re-run minus original")
    absolute = serializers.FloatField(allow_null=True)
    relative = serializers.FloatField(allow_null=True, help_text="absolute / |original|")
    relative_percent = serializers.FloatField(allow_null=True)
    identical = serializers.BooleanField()


class EnvironmentDifferenceSerializer(serializers.Serializer):
    key = serializers.CharField(help_text='Dotted, e.g. "versions.tensorflow", "dataset.sha256".')
    original = serializers.JSONField(allow_null=True)
    rerun = serializers.JSONField(allow_null=True)
    input = serializers.BooleanField(help_text="A changed input (dataset, code, seed), not just another machine.")


class RerunComparisonSerializer(serializers.Serializer):
    objective = DifferenceSerializer()
    best_epoch = DifferenceSerializer()
    metrics = DifferenceSerializer(many=True)
    environment_recorded = serializers.BooleanField()
    environment_differences = EnvironmentDifferenceSerializer(many=True)
    same_environment = serializers.BooleanField()
    same_inputs = serializers.BooleanField()
    notes = serializers.ListField(child=serializers.CharField())


class TrialRerunSerializer(serializers.ModelSerializer):
    comparison = serializers.SerializerMethodField()

    class Meta:
        model = TrialRerun
        fields = ["id", "number", "status", "error", "seed", "score", "best_epoch", "metrics", "compute",
                  "environment", "worker_host", "created", "started", "finished", "duration_seconds", "comparison"]

    def get_comparison(self, obj) -> RerunComparisonSerializer(allow_null=True):  # type: ignore[valid-type]
        return getattr(obj, "comparison", None)


class TrialDetailSerializer(TrialSerializer):
    """A trial with its re-runs, each finished one with how close it came."""

    reruns = serializers.SerializerMethodField()

    class Meta(TrialSerializer.Meta):
        fields = [*TrialSerializer.Meta.fields, "reruns"]

    def get_reruns(self, obj) -> TrialRerunSerializer(many=True):  # type: ignore[valid-type]
        return TrialRerunSerializer(trial_reruns(trial=obj), many=True, context=self.context).data


class AcceptedRerunSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="The trial, whose detail lists its re-runs.")
    rerun = TrialRerunSerializer()


class TrialEpochSerializer(serializers.ModelSerializer):
    class Meta:
        model = TrialEpoch
        fields = ["execution", "epoch", "metrics", "created"]


class ProgressSerializer(serializers.Serializer):
    completed = serializers.IntegerField()
    pruned = serializers.IntegerField()
    failed = serializers.IntegerField()
    running = serializers.IntegerField()
    total = serializers.IntegerField()
    max_trials = serializers.IntegerField()


class PruningSavedSerializer(serializers.Serializer):
    pruned = serializers.IntegerField(help_text="Pruned trials.")
    epochs = serializers.IntegerField(help_text="Epochs they did not train (up to epochs × executions each).")
    device_epochs = serializers.IntegerField(help_text="epochs × devices per trial (a CPU trial counts as one).")
    devices = serializers.IntegerField()
    unit = serializers.CharField(help_text="e.g. GPU-epochs")


class StudySerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    best_trial = serializers.SerializerMethodField()
    pruning_saved = serializers.SerializerMethodField()

    class Meta:
        model = Study
        fields = ["id", "url", "name", "dataset", "hypermodel", "search_space", "tuner", "objective_metric",
                  "objective_direction", "max_trials", "executions_per_trial", "epochs", "batch_size", "patience",
                  "seed", "queue", "parallelism", "initial_random_trials", "precision", "jit_compile",
                  "steps_per_execution", "devices_per_trial", *PRUNING_FIELDS, "status", "message", "created",
                  "started", "finished", "progress", "best_trial", "pruning_saved", "seeds", "seeds_used"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:study-detail", kwargs={"study_id": obj.id}))

    def _counts(self, obj) -> dict:
        counts = self.context.get("progress", {}).get(obj.id)
        if counts is None:
            counts = study_counts([obj.id]).get(obj.id, {})
            self.context.setdefault("progress", {})[obj.id] = counts
        return counts

    def get_progress(self, obj) -> ProgressSerializer:
        counts = {k: v for k, v in self._counts(obj).items() if k in Trial.Status.values}
        return {"completed": counts.get(Trial.Status.COMPLETED, 0), "pruned": counts.get(Trial.Status.PRUNED, 0),
                "failed": counts.get(Trial.Status.FAILED, 0),
                "running": counts.get(Trial.Status.RUNNING, 0), "total": sum(counts.values()),
                "max_trials": obj.max_trials}

    def get_pruning_saved(self, obj) -> PruningSavedSerializer(allow_null=True):  # type: ignore[valid-type]
        counts = self._counts(obj)
        return pruning_savings(obj, pruned=counts.get(Trial.Status.PRUNED, 0), trained=counts.get(PRUNED_TRAINED, 0))

    def get_best_trial(self, obj) -> TrialSerializer(allow_null=True):  # type: ignore[valid-type]
        if not self.context.get("with_best", True):
            return None
        best = study_best_trial(study=obj)
        return TrialSerializer(best, context=self.context).data if best is not None else None


class ModelFileSerializer(serializers.Serializer):
    format = serializers.CharField()
    filename = serializers.CharField()
    size = serializers.IntegerField()
    sha256 = serializers.CharField()
    url = serializers.CharField()


class MemberSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    key = serializers.CharField(help_text='"model:<id>" or "trial:<id>"')
    label = serializers.CharField()
    weight = serializers.FloatField(allow_null=True)
    val_metrics = serializers.DictField()
    test_metrics = serializers.DictField()


class TrainedModelSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    files = serializers.SerializerMethodField()
    members = serializers.SerializerMethodField()

    class Meta:
        model = TrainedModel
        fields = ["id", "url", "name", "version", "kind", "method", "status", "error", "dataset", "study", "trial",
                  "epoch_source", "epoch_cap", "greedy_rounds", "seed", "best_epoch", "epochs", "hyperparameters",
                  "val_metrics", "test_metrics", "report", "signature", "versions", "compute", "environment",
                  "created", "started", "finished", "duration_seconds", "files", "members"]

    def get_url(self, obj) -> str:
        name = "api:ensemble-detail" if obj.is_ensemble else "api:model-detail"
        key = "ensemble_id" if obj.is_ensemble else "model_id"
        return absolute(self.context, reverse(name, kwargs={key: obj.id}))

    def get_files(self, obj) -> ModelFileSerializer(many=True):  # type: ignore[valid-type]
        return [{"format": f.format, "filename": f.artifact.filename, "size": f.artifact.size,
                 "sha256": f.artifact.sha256,
                 "url": absolute(self.context, reverse("api:model-download", kwargs={"model_id": obj.id,
                                                                                     "fmt": f.format}))}
                for f in obj.files.select_related("artifact")]

    def get_members(self, obj) -> MemberSerializer(many=True):  # type: ignore[valid-type]
        if not obj.is_ensemble:
            return []
        return [{"position": m.position, "key": f"model:{m.model_id}" if m.model_id else f"trial:{m.trial_id}",
                 "label": m.display_label, "weight": m.weight, "val_metrics": m.val_metrics,
                 "test_metrics": m.test_metrics} for m in ensemble_members(ensemble=obj)]


class WorkerTrialSerializer(serializers.Serializer):
    study = serializers.IntegerField()
    trial = serializers.IntegerField()
    trial_id = serializers.CharField()


class WorkerSerializer(serializers.Serializer):
    name = serializers.CharField()
    hostname = serializers.CharField()
    queues = serializers.ListField(child=serializers.CharField())
    devices = serializers.JSONField()
    concurrency = serializers.IntegerField()
    versions = serializers.DictField()
    started = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField()
    stopped = serializers.DateTimeField(allow_null=True)
    alive = serializers.BooleanField()
    trials = WorkerTrialSerializer(many=True)
    other_teams_trials = serializers.IntegerField()


class LeaderboardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    id = serializers.IntegerField()
    label = serializers.CharField()
    model_name = serializers.CharField()
    version = serializers.IntegerField()
    kind = serializers.CharField()
    test = serializers.FloatField(allow_null=True)
    val = serializers.FloatField(allow_null=True)
    val_source = serializers.CharField()
    test_metrics = serializers.DictField()
    val_metrics = serializers.DictField()
    study_id = serializers.IntegerField(allow_null=True)
    study = serializers.CharField()
    hypermodel = serializers.CharField()
    author = serializers.CharField()
    created = serializers.DateTimeField()
    warning = serializers.CharField()
    hp = serializers.DictField()


class LeaderboardSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    metric = serializers.CharField()
    direction = serializers.CharField()
    hp_names = serializers.ListField(child=serializers.CharField())
    count = serializers.IntegerField()
    next = serializers.CharField(allow_null=True)
    previous = serializers.CharField(allow_null=True)
    results = LeaderboardRowSerializer(many=True)



class ComparedHistorySerializer(serializers.Serializer):
    number = serializers.ListField(child=serializers.IntegerField(), help_text="Trial numbers (1-based start order).")
    score = serializers.ListField(child=serializers.FloatField(), help_text="Each completed trial's objective.")
    best = serializers.ListField(child=serializers.FloatField(), help_text="The best objective so far.")
    trial = serializers.ListField(child=serializers.IntegerField(), help_text="Each point's trial id.")
    total = serializers.IntegerField(help_text="Completed trials with a score.")
    shown = serializers.IntegerField(help_text="Points kept (long histories are downsampled, improvements kept).")


class ComparedTrialSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    number = serializers.IntegerField()
    label = serializers.CharField()
    score = serializers.FloatField()
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True))
    hyperparameters = serializers.DictField(child=serializers.JSONField())


class ImportanceRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    importance = serializers.FloatField()


class ImportanceSerializer(serializers.Serializer):
    rows = ImportanceRowSerializer(many=True)
    trials = serializers.IntegerField(help_text="Completed trials the importance is estimated on.")
    message = serializers.CharField(allow_blank=True, help_text="Why there are no shares (e.g. too few trials).")


class ComparedStudySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    name = serializers.CharField()
    tuner = serializers.CharField()
    tuner_label = serializers.CharField()
    hypermodel = serializers.CharField()
    status = serializers.CharField()
    objective_metric = serializers.CharField()
    objective_direction = serializers.CharField()
    trials_total = serializers.IntegerField()
    trials_completed = serializers.IntegerField()
    history = ComparedHistorySerializer()
    best_trial = ComparedTrialSerializer(allow_null=True)
    importance = ImportanceSerializer()


class ObjectiveGroupSerializer(serializers.Serializer):
    metric = serializers.CharField()
    direction = serializers.CharField()
    studies = serializers.ListField(child=serializers.IntegerField())


class SideBySideRowSerializer(serializers.Serializer):
    name = serializers.CharField()
    values = serializers.ListField(child=serializers.JSONField(allow_null=True),
                                   help_text="One per study, in the order of `studies`; null where it has none.")


class StudyComparisonSerializer(serializers.Serializer):
    dataset = serializers.IntegerField()
    objectives = ObjectiveGroupSerializer(many=True, help_text="Studies that share an objective share a y axis.")
    objectives_differ = serializers.BooleanField()
    leader = serializers.IntegerField(allow_null=True, help_text="The study with the best best trial, when all "
                                                                 "share one objective.")
    importance_method = serializers.CharField()
    metrics = SideBySideRowSerializer(many=True, help_text="The best trials' metrics.")
    hyperparameters = SideBySideRowSerializer(many=True, help_text="The best trials' hyperparameters.")
    studies = ComparedStudySerializer(many=True)

# Write side: bodies (for the schema; the forms and services validate).

class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, and a body that is not an object."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields)) if hasattr(self.initial_data, "keys") else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class NoFields(StrictSerializer):
    """An action's body: none (any field is unknown)."""


class BundledDatasetInput(StrictSerializer):
    bundled_name = serializers.CharField()
    name = serializers.CharField(required=False, allow_blank=True)
    val_fraction = serializers.FloatField(required=False)
    test_fraction = serializers.FloatField(required=False)
    seed = serializers.IntegerField(required=False)


class DatasetUploadInput(StrictSerializer):
    name = serializers.CharField()
    file = serializers.FileField()
    kind = serializers.ChoiceField(choices=["auto", "tabular", "image", "text", "sequence"], required=False)
    target_column = serializers.CharField(required=False, allow_blank=True)
    text_column = serializers.CharField(required=False, allow_blank=True)
    window = serializers.IntegerField(required=False, allow_null=True)
    horizon = serializers.IntegerField(required=False, allow_null=True)
    image_size = serializers.CharField(required=False, allow_blank=True)
    color_mode = serializers.ChoiceField(choices=["auto", "grayscale", "rgb", "rgba"], required=False)
    task = serializers.ChoiceField(choices=["auto", "classification", "regression"], required=False)
    val_fraction = serializers.FloatField(required=False)
    test_fraction = serializers.FloatField(required=False)
    seed = serializers.IntegerField(required=False)


class StudyInput(StrictSerializer):
    name = serializers.CharField()
    dataset = serializers.IntegerField()
    hypermodel = serializers.CharField()
    search_space = serializers.JSONField(help_text="The editor's JSON list of hyperparameters.")
    tuner = serializers.ChoiceField(choices=Study.Tuner.choices)
    objective_metric = serializers.CharField()
    objective_direction = serializers.ChoiceField(choices=["auto", "min", "max"])
    max_trials = serializers.IntegerField()
    executions_per_trial = serializers.IntegerField()
    epochs = serializers.IntegerField()
    batch_size = serializers.IntegerField()
    patience = serializers.IntegerField()
    seed = serializers.IntegerField()
    queue = serializers.ChoiceField(choices=Study.Queue.choices)
    parallelism = serializers.IntegerField()
    initial_random_trials = serializers.IntegerField(required=False, allow_null=True)
    precision = serializers.CharField(required=False)
    jit_compile = serializers.CharField(required=False)
    steps_per_execution = serializers.IntegerField(required=False)
    devices_per_trial = serializers.IntegerField(required=False)
    seed_from = serializers.ListField(child=serializers.IntegerField(), required=False,
                                      help_text="Warm start: ids of earlier studies of the team whose best trials "
                                                "run first.")
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=20,
                                     help_text="Best trials taken from each study in seed_from (default 3).")
    pruner = serializers.ChoiceField(choices=list(PRUNERS), required=False, help_text="Default: none.")
    pruning_startup_trials = serializers.IntegerField(required=False)
    pruning_warmup_epochs = serializers.IntegerField(required=False)
    pruning_min_trials = serializers.IntegerField(required=False)
    pruning_percentile = serializers.FloatField(required=False, help_text="The percentile pruner's share kept.")
    pruning_min_epochs = serializers.IntegerField(required=False, help_text="Successive halving's first rung.")
    pruning_reduction_factor = serializers.IntegerField(required=False)
    start = serializers.BooleanField(required=False, default=False)


class BudgetInput(StrictSerializer):
    max_trials = serializers.IntegerField(required=False)
    parallelism = serializers.IntegerField(required=False)


class CloneInput(StrictSerializer):
    name = serializers.CharField(required=False, help_text='Defaults to "<name> (copy)".')
    dataset = serializers.IntegerField(required=False, help_text="Another dataset of the team; defaults to the "
                                                                  "original's.")
    seed_from = serializers.ListField(child=serializers.IntegerField(), required=False,
                                      help_text="Warm start: ids of earlier studies of the team (the original "
                                                "included, if wanted) whose best trials run first. None by default.")
    top_k = serializers.IntegerField(required=False, min_value=1, max_value=20,
                                     help_text="Best trials taken from each study in seed_from (default 3).")


class ModelRequestInput(StrictSerializer):
    top_n = serializers.IntegerField(required=False)
    trial = serializers.IntegerField(required=False, help_text="One trial's pk instead of top_n.")
    method = serializers.ChoiceField(choices=["retrain", "promote"], required=False)
    epoch_source = serializers.ChoiceField(choices=["detect", "recorded"], required=False)
    epoch_cap = serializers.IntegerField(required=False)
    name = serializers.CharField(required=False, allow_blank=True)
    include_pruned = serializers.BooleanField(required=False, default=False,
                                              help_text="With top_n: pick among pruned trials too.")


class EnsembleInput(StrictSerializer):
    members = serializers.ListField(child=serializers.CharField(), help_text='["model:12", "trial:34"]')
    method = serializers.ChoiceField(choices=["mean", "nelder_mead", "greedy"])
    name = serializers.CharField(required=False, allow_blank=True)
    greedy_rounds = serializers.IntegerField(required=False)
    seed = serializers.IntegerField(required=False)


class AcceptedModelsSerializer(serializers.Serializer):
    url = serializers.CharField()
    models = TrainedModelSerializer(many=True)


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    field = serializers.CharField(allow_null=True)
    errors = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


class WebhookSerializer(serializers.Serializer):
    """A team webhook; never its secret, and only the host of its URL (a Slack URL's path is a credential)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    address = serializers.CharField(source="display_url")
    events = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    created = serializers.DateTimeField()


class DeliverySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    event = serializers.CharField(source="event.kind")
    event_id = serializers.IntegerField()
    text = serializers.CharField(source="event.text")
    channel = serializers.ChoiceField(choices=["email", "webhook"])
    webhook = serializers.IntegerField(source="webhook_id", allow_null=True)
    target = serializers.CharField()
    status = serializers.ChoiceField(choices=["pending", "sent", "failed"])
    attempts = serializers.IntegerField()
    response_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    next_attempt = serializers.DateTimeField(allow_null=True)
    created = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    actor = serializers.CharField(source="actor.get_username", allow_null=True, default=None,
                                  help_text="The username, or null for the system (a worker, beat).")
    action = serializers.CharField(source="verb", help_text='e.g. "membership.add", "study.cancel", '
                                                            '"model.download".')
    object_type = serializers.CharField(source="content_type.model")
    object_id = serializers.CharField(source="object_pk")
    object = serializers.CharField(source="object_repr")
    changes = serializers.JSONField(allow_null=True)
    address = serializers.IPAddressField(source="remote_addr", allow_null=True)
