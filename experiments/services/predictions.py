"""Batch predictions: inputs without labels (parsed and checked in the web process by the forms)
predicted by a trained model or ensemble on a worker of the model's queue.

A prediction is a job (services/jobs.py, states in experiments/states.py), as a conversion is:
the request stores the inputs as an NPZ artifact ("x", and for a zip of images its file names as
"names_utf8" and "names_ends", datasets.arrays.strings_as_arrays) and
queues the job in one transaction; a worker claims it as a new attempt and every later write
names that attempt (the fence): its progress (rows done, after every batch), which also stops it
once a user cancelled the job or the reaper queued it again, and its completion with the CSV
and NPZ of predictions and a preview of the first rows."""

import tempfile

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from experiments.datasets.arrays import strings_as_arrays, write_npz
from experiments.datasets.inputs import ModelInputs
from experiments.errors import TuneboardError
from experiments.models import Artifact, ModelVersion, PredictionJob, Team, TrainedModel
from experiments.selectors.trained_models import keras_model_problem
from experiments.services.artifacts import artifact_create, artifact_files_removed_on_error
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_cancel, job_move, job_send
from experiments.states import JobStatus


class PredictionRequestError(TuneboardError):
    """A model that cannot predict (not finished, no .keras file); str(exc) says why."""


class PredictionCancelError(TuneboardError):
    pass


def prediction_model_problem(model: TrainedModel) -> str:
    """Why `model` cannot predict yet, or "" when it can (the forms show the same message)."""
    return keras_model_problem(model, once="it predicts", use="predict with")


def _inputs_file(inputs: ModelInputs):
    spool = tempfile.TemporaryFile(prefix="tuneboard-inputs-")
    members = {"x": (inputs.x, None)}
    if inputs.names:
        data, ends = strings_as_arrays(inputs.names)
        members["names_utf8"], members["names_ends"] = (data, None), (ends, None)
    write_npz(spool, members)
    spool.seek(0)
    return spool


def prediction_request(*, team: Team, user, model: TrainedModel, inputs: ModelInputs, filename: str = "",
                       requested_as: str = "", registry_version: ModelVersion | None = None,
                       is_try: bool = False, variant=None) -> PredictionJob:
    """Store the parsed inputs and queue their prediction by `model` (a completed model of the team)."""
    if model.team_id != team.id:
        raise PredictionRequestError("That model is not in this team.")
    if problem := prediction_model_problem(model):
        raise PredictionRequestError(problem)
    if variant is not None and (variant.model_id != model.pk or variant.status != JobStatus.COMPLETED):
        raise PredictionRequestError(f"Model {model} has no made quantized variant {variant.pk}.")
    with _inputs_file(inputs) as spool, artifact_files_removed_on_error() as created, transaction.atomic():
        stored = created(artifact_create(team=team, kind=Artifact.Kind.PREDICTION_INPUTS,
                                         filename=f"prediction-inputs-{model.name}-v{model.version}.npz",
                                         fileobj=spool))
        job = PredictionJob.objects.create(
            team=team, model=model, requested_as=requested_as, registry_version=registry_version,
            input_filename=filename[:255], inputs=stored, rows=inputs.rows, is_try=is_try, created_by=user,
            variant=variant)
        job_send(kind=JOB_KINDS["predictions"], row=job)
    return job


def prediction_progress(*, prediction_pk: int, attempt: int, rows_done: int) -> bool:
    """Rows predicted so far (and a heartbeat); False when this attempt no longer owns the job
    (cancelled, or queued again): its worker stops at once."""
    return bool(PredictionJob.objects.filter(pk=prediction_pk, status=JobStatus.RUNNING, attempts=attempt)
                .update(rows_done=rows_done, heartbeat=timezone.now()))


def prediction_complete(*, prediction_pk: int, attempt: int, predictions_csv: Artifact, predictions_npz: Artifact,
                        preview: list[dict], duration_seconds: float, environment: dict | None = None) -> bool:
    """The predictions at once; False (and nothing written) when this attempt no longer owns the job."""
    return job_move(kind=JOB_KINDS["predictions"], pk=prediction_pk, target=JobStatus.COMPLETED, attempt=attempt,
                    predictions_csv=predictions_csv, predictions_npz=predictions_npz, preview=preview,
                    rows_done=F("rows"), duration_seconds=duration_seconds, environment=environment or {},
                    finished=timezone.now())


def prediction_cancel(*, job: PredictionJob) -> None:
    """A user stops a queued or running prediction; a running worker stops after its current batch."""
    if not job_cancel(kind=JOB_KINDS["predictions"], pk=job.pk):
        raise PredictionCancelError(f"Prediction {job.pk} has already finished ({job.get_status_display().lower()}).")
