"""The job-kind table (JOB_KINDS: one row per kind): what the shared moves (services/jobs.py), the
reaper, probes, scaling, fair share and the worker's runner need to know of each kind
(docs/design/job-lifecycle.md)."""

from collections.abc import Callable
from dataclasses import dataclass

from experiments.models import (
    ModelConversion,
    ModelFile,
    ModelVariant,
    PredictionJob,
    ServingExport,
    TrainedModel,
    TrainedModelEpoch,
    TrialRerun,
    TrialRerunEpoch,
)
from experiments.models.jobs import Job
from experiments.selectors.serving_exports import serving_base_path, serving_folder, serving_plan
from experiments.services.notifications import notify_model_lost
from experiments.signals import model_finished
from experiments.states import JobStatus
from experiments.tuning.compute_options import DEFAULT_BACKEND, JAX_SUFFIX, task_queue

# Ensembles only predict and fit a few weights.
ENSEMBLE_QUEUE = "cpu"
# Converting (SavedModel, TFLite from a .keras file) is light and needs TensorFlow, whose workers
# serve the accelerator queues under their own names (compute_options): the CPU queue.
CONVERSION_QUEUE = task_queue("cpu", DEFAULT_BACKEND)
# Unzipping SavedModels needs no TensorFlow and no accelerator: the cpu queue, whose workers
# mount the serving volume (docker-compose.yml, deploy/kubernetes/overlays/serving).
SERVING_EXPORT_QUEUE = task_queue("cpu", DEFAULT_BACKEND)


@dataclass(frozen=True)
class JobKind:
    """One kind of job: everything the shared moves, the reaper, the probes and the worker's
    runner need to know about it. `task` is the only place its Celery task name is written."""

    name: str  # its key in JOB_KINDS, the reaper's counts and the scaling endpoint's fields
    label: str  # how a person names one row ("conversion 7")
    table: type[Job]
    task: str
    team: str  # the path from a row to its team's id (device time by team)
    queue_of: Callable[[Job], str]  # a row's queue (the row loaded with send_related)
    # Where its queue comes from, for counting by queue: the path from a row to the study it
    # follows (None: none), and the queue of rows that follow no study.
    study: str | None = None
    queue: str | None = None
    # Or, for a kind whose rows go to different queues not set by a study, the column holding each row's queue.
    queue_column: str | None = None
    send_related: tuple[str, ...] = ()
    claim_related: tuple[str, ...] = ()
    reset: Callable[[int], None] | None = None  # in the claim's transaction: an earlier attempt's output goes
    prepare: Callable[[Job], Job] | None = None  # what a claim adds to the row the worker gets
    on_lost: Callable[[Job, bool], None] | None = None  # (row, requeued) once the reaper moved it
    on_fail: Callable[[int, str], None] | None = None  # (pk, error) in the transaction that failed it
    page: str | None = None  # the URL name of a row's own page (its pk the one argument), if it has one
    title: str | None = None  # the path to the name a person knows a row by ("model 7 (best-mlp)"), if any


# An ensemble's members never change: each process works out its queue once (fair share reads the
# queue of every queued job on each claim). Keyed with its creation time too: SQLite may give a
# deleted row's id to the next one.
_ensemble_queues: dict[tuple, str] = {}


def model_queue(model: TrainedModel) -> str:
    """Single models train where their study ran; ensembles (no study) on the CPU queue, of JAX
    workers when every member comes from a JAX study (so a fleet without TensorFlow builds them)."""
    if model.study_id:
        return model.study.task_queue
    key = (model.pk, model.created)
    if key in _ensemble_queues:
        return _ensemble_queues[key]
    members = model.members.select_related("model__study", "trial__study")
    backends = {(member.trial.study if member.trial_id else member.model.study).backend
                if member.trial_id or member.model.study_id else DEFAULT_BACKEND for member in members}
    queue = task_queue(ENSEMBLE_QUEUE, backends.pop()) if len(backends) == 1 else ENSEMBLE_QUEUE
    if members and model.pk is not None:  # a model being built has no members yet
        if len(_ensemble_queues) > 10_000:
            _ensemble_queues.clear()
        _ensemble_queues[key] = queue
    return queue


def model_on_jax(model: TrainedModel) -> bool:
    """Whether the model's jobs run on JAX workers (which have no TensorFlow to run a TFLite file with)."""
    return model_queue(model).endswith(JAX_SUFFIX)


def _with_keras_file(row):
    """`keras_artifact`: the model's `.keras` file, or None when it has none."""
    file = row.model.files.filter(format=ModelFile.Format.KERAS).select_related("artifact").first()
    row.keras_artifact = None if file is None else file.artifact
    return row


def _with_plan(export: ServingExport) -> ServingExport:
    """`plan` (serving_plan as it stands now; serving_export_write reads it again once the folder
    is locked), `folder` and `base_path`."""
    export.plan = serving_plan(team=export.team)
    export.folder = serving_folder(team=export.team)
    export.base_path = serving_base_path(team=export.team)
    return export


def _model_lost(model: TrainedModel, requeued: bool) -> None:
    notify_model_lost(model=model, requeued=requeued)
    if not requeued:  # failed for good: recipe runs waiting on it fail too
        model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.FAILED,
                            error=f"lost {model.attempts} times (its worker stopped heartbeating)")


def _model_failed(pk: int, error: str) -> None:
    model_finished.send(sender=TrainedModel, model_pk=pk, status=JobStatus.FAILED, error=error)


# In the order the reaper's counts and the scaling endpoint's fields list them.
JOB_KINDS: dict[str, JobKind] = {kind.name: kind for kind in (
    JobKind(name="models", label="model", table=TrainedModel, task="workers.tasks.make_trained_model", team="team_id",
            queue_of=model_queue, study="study", queue=ENSEMBLE_QUEUE, send_related=("study",),
            claim_related=("study", "trial__checkpoint", "dataset__arrays", "dataset__upload", "team"),
            reset=lambda pk: TrainedModelEpoch.objects.filter(model_id=pk).delete(),
            on_lost=_model_lost, on_fail=_model_failed, page="model_detail", title="name"),
    JobKind(name="reruns", label="re-run", table=TrialRerun, task="workers.tasks.rerun_trial",
            team="trial__study__team_id",
            queue_of=lambda rerun: rerun.trial.study.task_queue, study="trial__study",
            send_related=("trial__study",),
            claim_related=("trial__study__dataset__arrays", "trial__study__dataset__upload", "trial__study__team"),
            reset=lambda pk: TrialRerunEpoch.objects.filter(rerun_id=pk).delete(), title="trial__study__name"),
    JobKind(name="conversions", label="conversion", table=ModelConversion, task="workers.tasks.convert_model",
            team="model__team_id",
            queue_of=lambda _row: CONVERSION_QUEUE, queue=CONVERSION_QUEUE,
            claim_related=("model__team",), prepare=_with_keras_file, title="model__name"),
    JobKind(name="serving_exports", label="serving export", table=ServingExport, team="team_id",
            task="workers.tasks.export_serving", queue_of=lambda _row: SERVING_EXPORT_QUEUE,
            queue=SERVING_EXPORT_QUEUE, claim_related=("team",), prepare=_with_plan),
    # A prediction runs where its model trained.
    JobKind(name="predictions", label="prediction", table=PredictionJob, task="workers.tasks.predict_batch",
            team="model__team_id",
            queue_of=lambda job: model_queue(job.model), study="model__study", queue=ENSEMBLE_QUEUE,
            send_related=("model__study",),
            claim_related=("model__dataset", "model__team", "inputs", "variant__artifact"),
            reset=lambda pk: PredictionJob.objects.filter(pk=pk).update(rows_done=0), prepare=_with_keras_file,
            page="prediction_detail", title="model__name"),
    JobKind(name="variants", label="quantized variant", table=ModelVariant, task="workers.tasks.quantize_model",
            team="model__team_id", queue_of=lambda variant: variant.queue, queue_column="queue",
            claim_related=("model__dataset", "model__team"), prepare=_with_keras_file, title="model__name"),
)}


def queue_place(kind: str, row: Job) -> str | None:
    """The accelerator queue whose page shows where a queued job waits; None once it is not queued."""
    if row.status != JobStatus.QUEUED:
        return None
    return JOB_KINDS[kind].queue_of(row).removesuffix(JAX_SUFFIX)
