"""Quantized variants: a user asks for one (the pages, the API and the CLI bind the same form), a worker makes
it from the model's `.keras` file, measures it beside the float model on the test split, and stores both
(workers/jobs/variants.py). A variant is a job (services/jobs.py): fenced by its attempt, reaped, cancellable."""

from django.db import transaction
from django.utils import timezone

from experiments.errors import TuneboardError
from experiments.models import Artifact, ModelVariant, TrainedModel
from experiments.selectors.trained_models import keras_model_problem
from experiments.services.artifacts import artifacts_delete
from experiments.services.job_kinds import CONVERSION_QUEUE, JOB_KINDS, model_queue
from experiments.services.jobs import job_cancel, job_move, job_send
from experiments.services.trained_models import model_artifact_download
from experiments.states import JOB_ACTIVE, JobStatus

Method = ModelVariant.Method


class VariantRequestError(TuneboardError):
    """A model that cannot be quantized yet; str(exc) says why."""


TEXT_TFLITE = ("TFLite cannot hold a text model's preprocessing (TextVectorization's string ops); ask for the "
               "Keras int8 variant instead.")
RECURRENT_FULL_INTEGER = ("No full-integer TFLite file for a model with recurrent layers (LSTM, GRU): TensorFlow's "
                          "calibration crashes on them; ask for the dynamic-range TFLite or the Keras int8 variant.")

FULL_INTEGER_METHODS = (Method.TFLITE_FULL_INTEGER, Method.TFLITE_INTEGER_IO, Method.TFLITE_PER_TENSOR)


def variant_model_problem(model: TrainedModel, method: str | None = None) -> str:
    """Why `model` cannot have the variant `method` (or any, with None), or "" when it can; the form shows the
    same message. What is known before any work is refused here; the rest fails on the worker with its reason."""
    problem = keras_model_problem(model, once="it can be quantized", use="quantize")
    if problem or method is None or not method.startswith("tflite"):
        return problem
    if model.dataset.kind == "text":
        return TEXT_TFLITE
    recurrent = model.study_id and model.study.hypermodel == "sequence" and \
        model.hyperparameters.get("layer_type") in ("lstm", "gru")
    if recurrent and method in FULL_INTEGER_METHODS:
        return RECURRENT_FULL_INTEGER
    return ""


def variant_queue(model: TrainedModel, method: str) -> str:
    """Keras quantizes on a worker of the model's own backend (a JAX model on a JAX worker); TFLite files
    need TensorFlow, as conversions do."""
    return CONVERSION_QUEUE if method.startswith("tflite") else model_queue(model)


def variant_request(*, model: TrainedModel, method: str, user=None) -> ModelVariant:
    """Queue the making of one variant. A variant of that method already queued, running or made is returned
    instead (a failed or cancelled one may be asked for again)."""
    if method not in Method.values:
        raise VariantRequestError(f"Unknown quantization {method!r}; one of {', '.join(Method.values)}.")
    with transaction.atomic():
        model = TrainedModel.objects.select_for_update().get(pk=model.pk)  # one request at a time per model
        problem = variant_model_problem(model, method)
        if problem:
            raise VariantRequestError(problem)
        existing = model.variants.filter(method=method, status__in=(*JOB_ACTIVE, JobStatus.COMPLETED)).first()
        if existing is not None:
            return existing
        variant = ModelVariant.objects.create(model=model, method=method, queue=variant_queue(model, method),
                                              created_by=user if user is not None and user.is_authenticated
                                              else None)
        job_send(kind=JOB_KINDS["variants"], row=variant)
    return variant


def variant_complete(*, variant_pk: int, attempt: int, artifact: Artifact, figures: dict, runtime: str,
                     duration_seconds: float, saved_model: Artifact | None = None,
                     environment: dict | None = None) -> bool:
    """The variant's file (and a Keras variant's SavedModel zip) and figures at once; False (and the files deleted)
    when this attempt no longer owns it."""
    moved = job_move(kind=JOB_KINDS["variants"], pk=variant_pk, target=JobStatus.COMPLETED, attempt=attempt,
                     artifact=artifact, saved_model=saved_model, figures=figures, runtime=runtime,
                     duration_seconds=duration_seconds, environment=environment or {}, finished=timezone.now())
    if not moved:
        artifacts_delete(artifacts=[a for a in (artifact, saved_model) if a is not None])
    return moved


def variant_cancel(*, variant: ModelVariant) -> bool:
    return job_cancel(kind=JOB_KINDS["variants"], pk=variant.pk)


def variant_download(*, variant: ModelVariant):
    """The chunks of a made variant's file, checked against its sha256 first; the download is audited."""
    return model_artifact_download(model=variant.model, artifact=variant.artifact, label=variant.get_method_display(),
                                   changes={"variant": variant.method},
                                   remedy="Retrain or promote the model again and quantize that")
