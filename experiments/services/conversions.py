"""Conversions: the serving formats a model's own worker could not make (SavedModel and TFLite
need TensorFlow; a JAX worker may not have it), made afterwards from its `.keras` file by a
TensorFlow worker of the cpu queue.

A conversion is a job (services/jobs.py, states in experiments/states.py): model_complete
requests it in the transaction that completes the model, which is usable (.keras) all the while;
a worker claims it as a new attempt and every later write names that attempt (the fence); the
reaper queues a lost one again and re-sends one whose task never arrived. Its completion adds
the new files to the model's downloads and the reasons for those it could not make to the
model's signature["unavailable"], as a model's own completion stores them."""

from django.db import transaction
from django.utils import timezone

from experiments.models import Artifact, ModelConversion, ModelFile, TrainedModel
from experiments.services.artifacts import artifacts_delete
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_move, job_send
from experiments.states import JOB_ACTIVE, JobStatus

# What a conversion may make: every format but the `.keras` file it starts from.
CONVERTIBLE_FORMATS = tuple(fmt for fmt in ModelFile.Format.values if fmt != ModelFile.Format.KERAS)
NO_FILE_REASON = "The TensorFlow worker that converted the .keras file made no file in this format."


def conversion_request(*, model: TrainedModel, formats) -> ModelConversion:
    """Queue the making of `formats` from the model's `.keras` file; one conversion at a time per
    model (a second request while one is queued or running returns that one)."""
    wanted = list(dict.fromkeys(formats))
    unknown = [fmt for fmt in wanted if fmt not in CONVERTIBLE_FORMATS]
    if not wanted or unknown:
        raise ValueError(f"A conversion makes some of {', '.join(CONVERTIBLE_FORMATS)}; asked for {wanted}.")
    with transaction.atomic():
        TrainedModel.objects.select_for_update().only("pk").get(pk=model.pk)  # one request at a time per model
        active = ModelConversion.objects.filter(model_id=model.pk, status__in=JOB_ACTIVE).first()
        if active is not None:
            return active
        conversion = ModelConversion.objects.create(model_id=model.pk, formats=wanted)
        job_send(kind=JOB_KINDS["conversions"], row=conversion)
    return conversion


def _merged_signature(current: dict, made: dict, *, formats: list[str], files: set[str],
                      unavailable: dict[str, str]) -> dict:
    """The model's signature once the conversion is done: reasons for the formats it was asked
    for are replaced by its own, the new files' input descriptions are added, and the serving
    signature (read from the SavedModel) filled in where the model's own worker could not."""
    merged = dict(current)
    kept = {fmt: why for fmt, why in (current.get("unavailable") or {}).items() if fmt not in formats}
    merged["unavailable"] = {**kept, **unavailable}
    described = made.get("input_description") or {}
    merged["input_description"] = {**(current.get("input_description") or {}),
                                   **{fmt: described[fmt] for fmt in files if fmt in described}}
    if made.get("serving") and not current.get("serving"):
        merged["serving"] = made["serving"]
    return merged


def conversion_complete(*, conversion_pk: int, attempt: int, files: dict[str, Artifact], signature: dict,
                        unavailable: dict[str, str], duration_seconds: float,
                        environment: dict | None = None) -> bool:
    """The new files and the reasons for the formats TFLite cannot hold, at once; False (and
    nothing written) when this attempt no longer owns the conversion. A file of a format the
    conversion was not asked for, or the model already has, is not stored (and deleted)."""
    with transaction.atomic():
        row = ModelConversion.objects.filter(pk=conversion_pk).only("formats", "model_id").first()
        if row is None:  # its model was deleted
            return False
        model = TrainedModel.objects.select_for_update().get(pk=row.model_id)
        present = set(model.files.values_list("format", flat=True))
        stored = {fmt: artifact for fmt, artifact in files.items() if fmt in row.formats and fmt not in present}
        missing = [fmt for fmt in row.formats if fmt not in stored and fmt not in present and fmt not in unavailable]
        unavailable = {**{fmt: why for fmt, why in unavailable.items() if fmt in row.formats},
                       **dict.fromkeys(missing, NO_FILE_REASON)}
        if not job_move(kind=JOB_KINDS["conversions"], pk=conversion_pk, target=JobStatus.COMPLETED, attempt=attempt,
                        unavailable=unavailable, duration_seconds=duration_seconds, environment=environment or {},
                        finished=timezone.now()):
            return False
        ModelFile.objects.bulk_create([ModelFile(model=model, format=fmt, artifact=artifact)
                                       for fmt, artifact in stored.items()])
        model.signature = _merged_signature(model.signature or {}, signature, formats=row.formats,
                                            files=set(stored), unavailable=unavailable)
        model.save(update_fields=["signature"])
        unused = [artifact for fmt, artifact in files.items() if fmt not in stored]
        if unused:
            transaction.on_commit(lambda: artifacts_delete(artifacts=unused))
    return True
