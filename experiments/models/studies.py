"""Studies and their trials: what the tuner proposes and what each trial recorded."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from experiments.models.artifacts import Artifact
from experiments.models.datasets import Dataset
from experiments.models.teams import Team
from experiments.states import StudyStatus, TrialStatus
from experiments.tuning.compute_options import BACKEND_NAMES, DEFAULT_BACKEND, JIT_COMPILE, PRECISIONS, task_queue
from experiments.tuning.pruning_options import DEFAULTS as PRUNING_DEFAULTS
from experiments.tuning.pruning_options import PRUNERS
from experiments.tuning.stopping_rules import PREFIX as STOPPED_EARLY


class Study(models.Model):
    Status = StudyStatus

    class Tuner(models.TextChoices):
        RANDOM = "random", "Random search"
        BAYESIAN = "bayesian", "Bayesian optimisation"
        HYPERBAND = "hyperband", "Hyperband"
        HYPERBAND_TPE = "hyperband_tpe", "Model-based Hyperband (TPE, BOHB-style)"
        GRID = "grid", "Grid search"
        OPTUNA_TPE = "optuna_tpe", "Optuna TPE"
        OPTUNA_GP = "optuna_gp", "Optuna Gaussian process"
        OPTUNA_NSGA2 = "optuna_nsga2", "Optuna NSGA-II"

    class Direction(models.TextChoices):
        MIN = "min", "minimise"
        MAX = "max", "maximise"

    class Queue(models.TextChoices):
        CPU = "cpu", "CPU"
        GPU = "gpu", "GPU"
        TPU = "tpu", "TPU"

    class Priority(models.TextChoices):
        HIGH = "high", "High"
        NORMAL = "normal", "Normal"
        LOW = "low", "Low"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="studies")
    name = models.CharField(max_length=100)
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="studies")
    hypermodel = models.CharField(max_length=100)
    # Labels people give a study; an ensemble recipe may take every study of its dataset with a tag.
    tags = models.JSONField(default=list, blank=True)
    search_space = models.JSONField(default=list)
    tuner = models.CharField(max_length=20, choices=Tuner.choices, default=Tuner.RANDOM)
    objective_metric = models.CharField(max_length=50, default="val_loss")
    objective_direction = models.CharField(max_length=3, choices=Direction.choices, default=Direction.MIN)
    max_trials = models.PositiveIntegerField(default=10)
    executions_per_trial = models.PositiveIntegerField(default=1)
    epochs = models.PositiveIntegerField(default=10)
    batch_size = models.PositiveIntegerField(default=32)
    patience = models.PositiveIntegerField(default=3)
    seed = models.IntegerField(default=1)
    queue = models.CharField(max_length=3, choices=Queue.choices, default=Queue.CPU)
    # The Keras backend its trials, retrains and re-runs train with (compute_options.BACKENDS).
    backend = models.CharField(max_length=10, choices=list(BACKEND_NAMES.items()), default=DEFAULT_BACKEND)
    parallelism = models.PositiveIntegerField(default=1)
    # Among its team's studies waiting for a slot of the queue, high goes first (experiments/scheduling).
    priority = models.CharField(max_length=6, choices=Priority.choices, default=Priority.NORMAL)
    # Why it waits for a slot (a team quota, another team's share, a higher priority); empty once it claims.
    queue_wait = models.TextField(blank=True)
    # A trial lost with its worker is retried this many times (KerasTuner's INVALID status).
    max_retries_per_trial = models.PositiveIntegerField(default=1)
    max_consecutive_failed_trials = models.PositiveIntegerField(default=3)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CREATED)
    message = models.TextField(blank=True)
    oracle_state = models.JSONField(null=True, blank=True)
    # Bumped on every oracle write, so a worker can tell whether its cached oracle is current.
    oracle_version = models.PositiveIntegerField(default=0)
    # Its history in segments, once extended: [{first_trial, tuner, max_trials, epochs, stop_device_hours, at, by}],
    # the original settings first (services/study_extensions.py).
    segments = models.JSONField(default=list, blank=True)
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
    # Several objectives (experiments/tuning/objectives.py): up to two more besides objective_metric,
    # [{"metric": "params", "direction": "min"}, ...]; then the result is a Pareto front.
    extra_objectives = models.JSONField(default=list, blank=True)
    # [{"metric": "params", "op": "<=", "value": 100000}, ...]: a trial that breaks one is infeasible.
    constraints = models.JSONField(default=list, blank=True)
    # Stopping rules: the objective reached stop_target, or no improvement by more than
    # stop_min_delta in stop_patience trials; the study then ends COMPLETED with the reason.
    stop_target = models.FloatField(null=True, blank=True)
    stop_patience = models.PositiveIntegerField(null=True, blank=True)
    stop_min_delta = models.FloatField(default=0.0)
    # A budget in device-hours: the study ends COMPLETED with the reason once its finished trials used it.
    stop_device_hours = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name_plural = "studies"

    def __str__(self) -> str:
        return self.name

    @property
    def task_queue(self) -> str:
        """The Celery queue its jobs go to: its accelerator queue on its backend's workers."""
        return task_queue(self.queue, self.backend)

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.RUNNING

    @property
    def stopped_early(self) -> bool:
        """Ended by a stopping rule before its budget was spent; `message` says which and why."""
        return self.status == self.Status.COMPLETED and self.message.startswith(STOPPED_EARLY)

    @property
    def can_start(self) -> bool:
        return self.status in (self.Status.CREATED, self.Status.CANCELLED, self.Status.FAILED)


class Trial(models.Model):
    Status = TrialStatus

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
    # Under the study's constraints: None while it runs, when it has no result, or without constraints.
    feasible = models.BooleanField(null=True, blank=True)
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
    # What it cost: its wall time times the devices it held (device_kind: cpu, gpu or tpu), set when it ends.
    device_seconds = models.FloatField(null=True, blank=True)
    device_kind = models.CharField(max_length=3, blank=True)
    # What it takes to reproduce it (experiments/tuning/reproducibility.py): dataset hash and split,
    # seed, package versions, host and devices, the hypermodel's code identity.
    environment = models.JSONField(default=dict, blank=True)
    # Epochs it trained, over all its executions (set when it finishes).
    epochs_trained = models.PositiveIntegerField(null=True, blank=True)
    # A pruned trial's decision: experiments.tuning.pruners.Decision.record().
    pruning = models.JSONField(default=dict, blank=True)
    # When fair share asked it to stop at its next epoch end for a waiting study (preemption).
    preempted = models.DateTimeField(null=True, blank=True)
    # A preempted attempt's state, and then its next attempt's: the epoch to go on from, the epochs so far,
    # early stopping's best and wait, the last and best weights' artifacts (workers/jobs/trials.py).
    resume = models.JSONField(default=dict, blank=True)
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


class TrialEpoch(models.Model):
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="epochs")
    execution = models.PositiveIntegerField(default=0)
    epoch = models.PositiveIntegerField()
    metrics = models.JSONField(default=dict)
    # The objective's best value so far in this execution, kept for pruning studies only: the
    # pruner compares trials at one epoch by it without reading every earlier epoch.
    best_objective = models.FloatField(null=True, blank=True)
    # Pareto pruning's point at this epoch (pareto_pruning.Point.record(): the watched objectives and the violation).
    point = models.JSONField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["execution", "epoch"]
        constraints = [
            models.UniqueConstraint(fields=["trial", "execution", "epoch"], name="one_row_per_epoch")
        ]


class PruningReference(models.Model):
    """A finished trial's best-so-far objective at one epoch, what the pruner compares with, kept apart so one
    index-only read per epoch report finds them."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    trial = models.ForeignKey(Trial, on_delete=models.CASCADE, related_name="+")
    execution = models.PositiveIntegerField()
    epoch = models.PositiveIntegerField()
    best_objective = models.FloatField()
    completed = models.BooleanField()  # False: pruned (the startup rule counts completed trials)
    point = models.JSONField(null=True, blank=True)  # a Pareto-pruning study's: the vector it is compared by

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["trial", "execution", "epoch"], name="one_reference_per_epoch")
        ]
        # Every column a lookup reads is in the key: an index-only scan (SQLite has no INCLUDE).
        indexes = [models.Index(fields=["study", "execution", "epoch", "best_objective", "completed"],
                                name="pruning_reference_lookup")]
