"""The domain's tables. Rules about one row live here as methods; writes live in services."""

from auditlog.models import AbstractLogEntry
from django.conf import settings
from django.db import models
from django.utils import timezone
from knox.models import AbstractAuthToken

from experiments.states import TRIAL_FINISHED, DeliveryStatus, ModelStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import JIT_COMPILE, PRECISIONS
from experiments.tuning.pruning_options import DEFAULTS as PRUNING_DEFAULTS
from experiments.tuning.pruning_options import PRUNERS


class Team(models.Model):
    name = models.CharField(max_length=100, unique=True)
    created = models.DateTimeField(default=timezone.now)
    # The test metric the leaderboard and the dashboard rank models by (experiments/presentation/ranking_rule.py);
    # empty: accuracy for classification, the loss for regression.
    ranking_metric = models.CharField(max_length=50, blank=True, default="")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        EDITOR = "editor", "Editor"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.EDITOR)
    # When the user last chose this team (the switcher, accepting an invitation): with no team in
    # the session, a new login opens the one chosen last, else the oldest membership.
    last_chosen = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    @property
    def can_edit(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.EDITOR)

    @property
    def is_owner(self) -> bool:
        return self.role == self.Role.OWNER

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}  # the audit log's team (django-auditlog calls this)


# Lowest first: a token acts with the lower of its own role and its user's.
ROLE_RANK = {Membership.Role.VIEWER: 0, Membership.Role.EDITOR: 1, Membership.Role.OWNER: 2}


def lower_role(a: str, b: str) -> str:
    return a if ROLE_RANK[a] <= ROLE_RANK[b] else b


class StoredBlob(models.Model):
    """A file kept in PostgreSQL by experiments.storage.DatabaseStorage, as ordered chunks."""

    name = models.CharField(max_length=255, unique=True)
    size = models.BigIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)


class StoredChunk(models.Model):
    blob = models.ForeignKey(StoredBlob, on_delete=models.CASCADE, related_name="chunks")
    index = models.IntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["blob", "index"], name="one_chunk_per_index")]


class Artifact(models.Model):
    """A file of the domain (dataset, checkpoint, model) in the artifact storage, with its hash."""

    class Kind(models.TextChoices):
        DATASET_UPLOAD = "dataset_upload", "Uploaded dataset file"
        DATASET_ARRAYS = "dataset_arrays", "Dataset splits"
        CHECKPOINT = "checkpoint", "Trial checkpoint"
        MODEL = "model", "Trained model"
        PREDICTIONS = "predictions", "Cached predictions"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="artifacts")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    filename = models.CharField(max_length=255)
    storage_name = models.CharField(max_length=255, unique=True)
    size = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    created = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.kind}:{self.filename}"


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


class Study(models.Model):
    Status = StudyStatus

    class Tuner(models.TextChoices):
        RANDOM = "random", "Random search"
        BAYESIAN = "bayesian", "Bayesian optimisation"
        HYPERBAND = "hyperband", "Hyperband"
        GRID = "grid", "Grid search"

    class Direction(models.TextChoices):
        MIN = "min", "minimise"
        MAX = "max", "maximise"

    class Queue(models.TextChoices):
        CPU = "cpu", "CPU"
        GPU = "gpu", "GPU"
        TPU = "tpu", "TPU"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=100)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="studies")
    hypermodel = models.CharField(max_length=100)
    search_space = models.JSONField(default=list)
    tuner = models.CharField(max_length=10, choices=Tuner.choices, default=Tuner.RANDOM)
    objective_metric = models.CharField(max_length=50, default="val_loss")
    objective_direction = models.CharField(max_length=3, choices=Direction.choices, default=Direction.MIN)
    max_trials = models.PositiveIntegerField(default=10)
    executions_per_trial = models.PositiveIntegerField(default=1)
    epochs = models.PositiveIntegerField(default=10)
    batch_size = models.PositiveIntegerField(default=32)
    patience = models.PositiveIntegerField(default=3)
    seed = models.IntegerField(default=1)
    queue = models.CharField(max_length=3, choices=Queue.choices, default=Queue.CPU)
    parallelism = models.PositiveIntegerField(default=1)
    # A trial lost with its worker is retried this many times (KerasTuner's INVALID status).
    max_retries_per_trial = models.PositiveIntegerField(default=1)
    max_consecutive_failed_trials = models.PositiveIntegerField(default=3)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CREATED)
    message = models.TextField(blank=True)
    oracle_state = models.JSONField(null=True, blank=True)
    # Bumped on every oracle write, so a worker can tell whether its cached oracle is current.
    oracle_version = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    # Last claim or finish.
    last_activity = models.DateTimeField(null=True, blank=True)
    # Wake-ups sent to the broker and not yet picked up by a worker, and when the last was
    # sent: a slot neither running a trial nor covered by a wake-up in flight is refilled.
    wakeups_pending = models.PositiveIntegerField(default=0)
    last_wakeup = models.DateTimeField(null=True, blank=True)
    # Resends since a wake-up last led to a claim: each doubles the wait before the next.
    wakeup_resends = models.PositiveIntegerField(default=0)
    # len(oracle end_order) at the last start: failures before it do not count towards
    # max_consecutive_failed_trials, so a FAILED study can really be resumed.
    failures_counted_from = models.PositiveIntegerField(default=0)
    # Bayesian optimisation's random trials before its Gaussian process takes over; empty
    # means KerasTuner's default, 3 x the number of hyperparameters.
    initial_random_trials = models.PositiveIntegerField(null=True, blank=True)
    # Compute settings (experiments/tuning/compute_options.py): retrains and ensembles reuse them.
    precision = models.CharField(max_length=16, choices=list(PRECISIONS.items()), default="float32")
    jit_compile = models.CharField(max_length=4, choices=list(JIT_COMPILE.items()), default="auto")
    steps_per_execution = models.PositiveIntegerField(default=1)
    devices_per_trial = models.PositiveIntegerField(default=1)
    # Warm start (experiments/services/warm_starts.py): configurations of earlier trials, run
    # first and in order; `seeds_used` of them have been claimed (written under the row lock).
    seeds = models.JSONField(default=list, blank=True)
    seeds_used = models.PositiveIntegerField(default=0)
    # Pruning (experiments/tuning/pruning_options.py): stop trials that are clearly behind at an epoch.
    pruner = models.CharField(max_length=20, choices=list(PRUNERS.items()), default="none")
    pruning_startup_trials = models.PositiveIntegerField(default=PRUNING_DEFAULTS["startup_trials"])
    pruning_warmup_epochs = models.PositiveIntegerField(default=PRUNING_DEFAULTS["warmup_epochs"])
    pruning_min_trials = models.PositiveIntegerField(default=PRUNING_DEFAULTS["min_trials"])
    pruning_percentile = models.FloatField(default=PRUNING_DEFAULTS["percentile"])
    pruning_min_epochs = models.PositiveIntegerField(default=PRUNING_DEFAULTS["min_epochs"])
    pruning_reduction_factor = models.PositiveIntegerField(default=PRUNING_DEFAULTS["reduction_factor"])

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def can_start(self) -> bool:
        return self.status in (self.Status.CREATED, self.Status.CANCELLED, self.Status.FAILED)


class Trial(models.Model):
    Status = TrialStatus
    FINISHED = TRIAL_FINISHED

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="trials")
    trial_id = models.CharField(max_length=20)
    # Start order: trial ids are zero-padded strings, so never sort by them.
    number = models.PositiveIntegerField()
    # Which run of this KerasTuner trial (a retried trial keeps its id).
    attempt = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    hyperparameters = models.JSONField(default=dict)
    kt_state = models.JSONField(default=dict)
    # The study's oracle_version when kt_state was last written: a worker whose cached
    # oracle is at version v refreshes only the rows above v.
    oracle_version = models.PositiveIntegerField(default=0)
    score = models.FloatField(null=True, blank=True)
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    tuner_id = models.CharField(max_length=200, blank=True)
    worker_host = models.CharField(max_length=200, blank=True)
    worker_name = models.CharField(max_length=200, blank=True, db_index=True)
    checkpoint = models.ForeignKey(Artifact, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    started = models.DateTimeField(default=timezone.now)
    heartbeat = models.DateTimeField(default=timezone.now)
    finished = models.DateTimeField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    # How long the wake-up claim that started it took (lock wait included), written with the
    # row itself; empty when a finisher claimed it under its finish's lock. /metrics reads it.
    claim_ms = models.FloatField(null=True, blank=True)
    # Where and how it ran: device kind and names, replicas, precision, XLA, versions.
    compute = models.JSONField(default=dict, blank=True)
    # What it takes to reproduce it (experiments/tuning/reproducibility.py): dataset hash and split,
    # seed, package versions, host and devices, the hypermodel's code identity.
    environment = models.JSONField(default=dict, blank=True)
    # Epochs it trained, over all its executions (set when it finishes).
    epochs_trained = models.PositiveIntegerField(null=True, blank=True)
    # A pruned trial's decision: experiments.tuning.pruners.Decision.record().
    pruning = models.JSONField(default=dict, blank=True)
    # People's annotations: they may change on a finished trial; its results never do.
    notes = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    # The earlier trial whose configuration this one runs again (a warm-start seed).
    seeded_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="seeded_trials")

    class Meta:
        ordering = ["number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "trial_id", "attempt"], name="one_row_per_trial_attempt")
        ]
        indexes = [
            models.Index(fields=["study", "status"]), models.Index(fields=["study", "oracle_version"]),
            # /metrics counts its histograms from these alone (index-only scans), not the wide rows.
            models.Index(fields=["claim_ms"], condition=models.Q(claim_ms__isnull=False), name="trial_claim_ms"),
            models.Index(fields=["duration_seconds"], name="trial_completed_duration",
                         condition=models.Q(status=TrialStatus.COMPLETED, duration_seconds__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.study} trial {self.trial_id}"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED


class TrialEpoch(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="epochs")
    execution = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField()
    metrics = models.JSONField(default=dict)
    # The objective's best value so far in this execution, kept for pruning studies only: the
    # pruner compares trials at one epoch by it without reading every earlier epoch.
    best_objective = models.FloatField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["execution", "epoch"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "execution", "epoch"], name="one_row_per_epoch")
        ]


class PruningReference(models.Model):
    """A finished (completed or pruned) trial's best-so-far objective at one epoch of a pruning
    study, copied from its TrialEpoch rows when it finishes: what the pruner compares a running
    trial with (experiments/tuning/pruners.py). Kept apart so one index-only read per epoch report
    finds them, however many epochs and trials the study has; rows of finished trials never
    change, so neither do these."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    execution = models.PositiveIntegerField()
    epoch = models.PositiveIntegerField()
    best_objective = models.FloatField()
    completed = models.BooleanField()  # False: pruned (the startup rule counts completed trials)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "execution", "epoch"], name="one_reference_per_epoch")
        ]
        # Every column a lookup reads is in the key: an index-only scan (SQLite has no INCLUDE).
        indexes = [models.Index(fields=["study", "execution", "epoch", "best_objective", "completed"],
                                name="pruning_reference_lookup")]


class Worker(models.Model):
    """A Celery worker (one node, `concurrency` child processes); it heartbeats while alive."""

    name = models.CharField(max_length=200, unique=True)
    hostname = models.CharField(max_length=200)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    devices = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField(default=1)
    versions = models.JSONField(default=dict)
    started = models.DateTimeField(default=timezone.now)
    last_heartbeat = models.DateTimeField(default=timezone.now)
    stopped = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["hostname", "name"]

    def __str__(self) -> str:
        return self.name

    def is_alive(self, now=None) -> bool:
        from django.conf import settings

        now = now or timezone.now()
        stale_after = 3 * settings.WORKER_HEARTBEAT_SECONDS
        return self.stopped is None and (now - self.last_heartbeat).total_seconds() < stale_after


class TrainedModel(models.Model):
    """A model made from a trial's configuration and handed to users: retrained on
    train+validation for 1.2x its best epoch, or the trial's checkpoint promoted as is.
    Versions count up per (team, name), as TF Serving's version directories do."""

    class Kind(models.TextChoices):
        SINGLE = "single", "Single model"
        ENSEMBLE = "ensemble", "Ensemble"

    class Method(models.TextChoices):
        RETRAIN = "retrain", "Retrained on train+validation"
        PROMOTE = "promote", "Promoted trial checkpoint"
        MEAN = "mean", "Ensemble: mean"
        NELDER_MEAD = "nelder_mead", "Ensemble: weights by Nelder–Mead"
        GREEDY = "greedy", "Ensemble: greedy selection"

    class EpochSource(models.TextChoices):
        DETECT = "detect", "Detected again (EarlyStopping on val_loss, patience 10)"
        RECORDED = "recorded", "The trial's recorded best epoch"

    Status = ModelStatus

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
    seed = models.IntegerField()
    hyperparameters = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    epochs = models.PositiveIntegerField(null=True, blank=True)
    val_metrics = models.JSONField(default=dict, blank=True)
    test_metrics = models.JSONField(default=dict, blank=True)
    # Input and output tensors of the exported model, and the packages that made it.
    signature = models.JSONField(default=dict, blank=True)
    versions = models.JSONField(default=dict, blank=True)
    compute = models.JSONField(default=dict, blank=True)
    environment = models.JSONField(default=dict, blank=True)  # as Trial.environment
    # Each claim is a new attempt; every write of the worker carries it (the fence).
    attempts = models.PositiveIntegerField(default=0)
    # Attempts handed back by a worker shutting down: not the job's fault, so not counted as lost.
    releases = models.PositiveIntegerField(default=0)
    worker_host = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    # When its task was last sent to the broker: a QUEUED model unclaimed for long is re-sent.
    last_sent = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveIntegerField(default=0)
    duration_seconds = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name", "version"], name="model_version_unique_in_team")
        ]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

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


class Invitation(models.Model):
    """An offer of a seat in a team, with a role, that only its invitee's own click turns into a
    membership. It names an e-mail address (its link, e-mailed, lets whoever holds it sign up or
    log in and accept) or a username (only that account accepts). Either way the invitee also
    finds it on their dashboard when an account of theirs matches, and accepts or declines there.

    Only the sha256 of the link's token is kept: the link is shown once to the owner who made
    it (and e-mailed), so a leaked database does not hand out team seats."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)
    username = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.EDITOR)
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    declined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [models.CheckConstraint(condition=~models.Q(email="") | ~models.Q(username=""),
                                              name="invitation_names_someone")]

    def __str__(self) -> str:
        return f"{self.invitee} to {self.team} ({self.role})"

    @property
    def invitee(self) -> str:
        return self.email or self.username

    @property
    def is_accepted(self) -> bool:
        return self.accepted_at is not None

    @property
    def is_declined(self) -> bool:
        return self.declined_at is not None

    @property
    def is_open(self) -> bool:
        return not (self.is_accepted or self.is_declined or self.is_expired)

    @property
    def is_expired(self) -> bool:
        return not self.is_accepted and timezone.now() >= self.expires

    def is_for(self, user) -> bool:
        """Whether `user`'s account is the one invited (its username, or its e-mail address)."""
        if self.username:
            return user.get_username().casefold() == self.username.casefold()
        return bool(user.email) and user.email.casefold() == self.email.casefold()

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}


class ApiToken(AbstractAuthToken):
    """A personal API token (django-rest-knox): only its digest is stored; the token itself is
    shown once, when it is made. It acts for its user in one team, with at most `role` (and never
    more than the user's own role there, which is read on every request)."""

    name = models.CharField(max_length=100)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_tokens")
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.EDITOR)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({self.token_key[:8]}…)"

    @property
    def is_expired(self) -> bool:
        return self.expiry is not None and timezone.now() >= self.expiry

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}


# --- notifications (experiments/services/notifications.py) ----------------------------------


class EventKind(models.TextChoices):
    STUDY_COMPLETED = "study.completed", "Study finished"
    STUDY_FAILED = "study.failed", "Study failed"
    MODEL_READY = "model.ready", "Model ready"
    ENSEMBLE_READY = "ensemble.ready", "Ensemble ready"
    WORKER_LOST = "worker.lost", "Worker lost"
    TEST = "test", "Test"


# What people can subscribe to (a test goes to the one webhook it was sent from).
SUBSCRIBABLE_EVENTS = [(kind.value, kind.label) for kind in EventKind if kind != EventKind.TEST]


class NotificationPreference(models.Model):
    """Which events of one team a user wants by e-mail. No row means none: e-mail is opt-in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="notification_preferences")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    events = models.JSONField(default=list, blank=True)
    # Only studies and models this user created (and their lost trials).
    only_mine = models.BooleanField(default=False)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_preference_per_user_and_team")]


class Webhook(models.Model):
    """A team's receiver of events: Slack-compatible JSON, signed with the secret (HMAC-SHA256).

    The secret is kept as is, since signing needs it; it is shown once, when it is made."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=128)
    events = models.JSONField(default=list)
    active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    def get_additional_data(self) -> dict:
        return {"team": self.team_id}

    @property
    def display_url(self) -> str:
        """Scheme and host only: the path of a Slack webhook URL is itself a credential."""
        from urllib.parse import urlsplit

        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/…"


class NotificationEvent(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=20, choices=EventKind.choices)
    text = models.TextField()
    # The webhook body as sent: Slack's "text" plus structured fields.
    payload = models.JSONField(default=dict)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created", "-id"]


class NotificationDelivery(models.Model):
    """One e-mail or webhook call of one event, tried until sent or out of attempts."""

    class Channel(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook"

    Status = DeliveryStatus

    event = models.ForeignKey(NotificationEvent, on_delete=models.CASCADE, related_name="deliveries")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    webhook = models.ForeignKey(Webhook, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")
    # The e-mail address, or the webhook's name and host, as shown on the team page.
    target = models.CharField(max_length=300)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    # When the next attempt is due; while one is under way, when it counts as lost.
    next_attempt = models.DateTimeField(null=True, blank=True)
    # When its task was last handed to the broker, and how often the sweep had to do it again.
    last_sent = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveIntegerField(default=0)
    # One entry per attempt: {"at", "ok", "code", "error"}.
    history = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt"])]
class TrialRerun(models.Model):
    """A finished trial's configuration trained again, same seed, settings and split, to see how
    close the result comes. It lives beside the search: the tuner never hears of it and it is
    not one of the study's trials. Its lifecycle is a model run's (services/model_runs.py:
    claim with a new attempt, fenced writes, heartbeat, reaper), on the study's queue."""

    Status = ModelStatus

    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="reruns")
    # 1, 2, ... per trial, for labels.
    number = models.PositiveIntegerField()
    seed = models.IntegerField()
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    score = models.FloatField(null=True, blank=True)
    best_epoch = models.PositiveIntegerField(null=True, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    compute = models.JSONField(default=dict, blank=True)
    environment = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    worker_host = models.CharField(max_length=200, blank=True)
    heartbeat = models.DateTimeField(null=True, blank=True)
    last_sent = models.DateTimeField(null=True, blank=True)
    resends = models.PositiveIntegerField(default=0)
    duration_seconds = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["trial", "number"]
        constraints = [models.UniqueConstraint(fields=["trial", "number"], name="one_rerun_per_number")]
        indexes = [models.Index(fields=["status", "heartbeat"])]

    def __str__(self) -> str:
        return f"{self.trial} re-run {self.number}"

    @property
    def is_active(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)


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


# --- audit log (experiments/services/audit.py) -----------------------------------------------


class AuditEvent(AbstractLogEntry):
    """Who changed what in which team, from which address: django-auditlog's log entry (its
    changes, actor, address, correlation id) with the team and a verb to filter on. Written in the
    transaction of the change it records, so a change that rolls back leaves no row."""

    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    # "<object>.<what>": membership.create, invitation.accept, study.cancel, model.download, ...
    verb = models.CharField(max_length=40, db_index=True)

    class Meta(AbstractLogEntry.Meta):
        verbose_name = "audit event"
        verbose_name_plural = "audit events"
        indexes = [models.Index(fields=["team", "-timestamp"], name="audit_team_time")]

    @property
    def change_summary(self) -> str:
        """"role: viewer → editor; …" for a change, "format: keras" for an action's details."""
        parts = []
        for name, value in (self.changes if isinstance(self.changes, dict) else {}).items():
            if isinstance(value, list) and len(value) == 2:
                old, new = ("—" if v in (None, "", "None") else v for v in value)
                parts.append(f"{name}: {new}" if self.action == self.Action.CREATE else
                             f"{name}: {old}" if self.action == self.Action.DELETE else f"{name}: {old} → {new}")
            else:
                parts.append(f"{name}: {value}")
        return "; ".join(parts)


class PasswordResetRequest(models.Model):
    """One request of /password/reset/ in the last hour (experiments/services/password_resets.py)."""

    email_digest = models.CharField(max_length=64, db_index=True)
    client = models.GenericIPAddressField(null=True, blank=True, db_index=True)
    created = models.DateTimeField(default=timezone.now, db_index=True)
    allowed = models.BooleanField()
