"""What the API shows of each object (read side) and the bodies it accepts (write side).

Writes are validated by the same forms and services as the pages, so the messages match;
these input serializers only describe the bodies for the schema and refuse unknown fields."""

from django.urls import reverse
from rest_framework import serializers

from experiments.models import Dataset, Study, TrainedModel, Trial, TrialEpoch
from experiments.pruning_options import MODEL_FIELDS as PRUNING_FIELDS
from experiments.pruning_options import PRUNERS

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


class TrialSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()

    class Meta:
        model = Trial
        fields = ["id", "url", "study", "trial_id", "number", "attempt", "status", "hyperparameters", "score",
                  "best_epoch", "metrics", "error", "worker_host", "worker_name", "started", "finished",
                  "duration_seconds", "compute", "notes", "tags", "epochs_trained", "pruning"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:trial-detail", kwargs={"study_id": obj.study_id,
                                                                           "trial_pk": obj.pk}))


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
                  "started", "finished", "progress", "best_trial", "pruning_saved"]

    def get_url(self, obj) -> str:
        return absolute(self.context, reverse("api:study-detail", kwargs={"study_id": obj.id}))

    def _counts(self, obj) -> dict:
        counts = self.context.get("progress", {}).get(obj.id)
        if counts is None:
            from experiments.api.views import study_counts
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
        from experiments.api.views import PRUNED_TRAINED
        from experiments.selectors import pruning_savings
        counts = self._counts(obj)
        return pruning_savings(obj, pruned=counts.get(Trial.Status.PRUNED, 0), trained=counts.get(PRUNED_TRAINED, 0))

    def get_best_trial(self, obj) -> TrialSerializer(allow_null=True):  # type: ignore[valid-type]
        if not self.context.get("with_best", True):
            return None
        from experiments.selectors import study_best_trial
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
                  "val_metrics", "test_metrics", "report", "signature", "versions", "compute", "created", "started",
                  "finished", "duration_seconds", "files", "members"]

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
        from experiments.selectors import ensemble_members
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


# Write side: bodies (for the schema; the forms and services validate).

class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, and a body that is not an object."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields)) if hasattr(self.initial_data, "keys") else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


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
    name = serializers.CharField()


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
