"""Trained models: the web's requests to retrain or promote trials, their names and versions, and what only
models add to the shared job lifecycle (their epochs, files, ensemble members, cancel, notifications)."""

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.text import slugify

from experiments.errors import TuneboardError
from experiments.models import Artifact, EnsembleMember, ModelFile, Study, Team, TrainedModel, TrainedModelEpoch, Trial
from experiments.selectors.artifacts import ArtifactCorrupted, ArtifactMissing, artifact_iter_chunks, artifact_verify
from experiments.services.audit import audit_record
from experiments.services.conversions import conversion_request
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_cancel, job_move, job_record_epoch, job_send
from experiments.services.notifications import notify_model_ready
from experiments.signals import model_finished
from experiments.states import JobStatus

MAX_EPOCH_CAP = 1000


class ModelRequestError(TuneboardError):
    """Why a retrain/promote request cannot be saved; str(exc) is shown to the user."""


MAX_MODEL_NAME = 80


def default_model_name(study: Study) -> str:
    return slugify(study.name)[:MAX_MODEL_NAME] or f"study-{study.id}"


def trial_model_name(study: Study, trial: Trial, *, base: str = "") -> str:
    """`<base>-trial-<number>`, numbered as the pages number trials (1-based start order), so each trial's model has a
    name of its own."""
    suffix = f"-trial-{trial.number}"
    if base:
        if len(base) + len(suffix) > MAX_MODEL_NAME:
            raise ModelRequestError(f"The model name {base!r} is too long to name several models: with "
                                    f"{suffix!r} added it would pass {MAX_MODEL_NAME} characters; shorten it.")
        return base + suffix
    return default_model_name(study)[:MAX_MODEL_NAME - len(suffix)].rstrip("-_") + suffix


def last_version_locked(*, team_id: int, name: str) -> int:
    """The highest version of `name` in the team, holding the team row's lock until the
    transaction ends: remaking a name counts its version up without gaps or clashes."""
    Team.objects.select_for_update().get(pk=team_id)
    return TrainedModel.objects.filter(team_id=team_id, name=name).aggregate(v=Max("version"))["v"] or 0


def check_model_name(name: str) -> str:
    if len(name) > MAX_MODEL_NAME:
        raise ModelRequestError(f"A model name can have at most {MAX_MODEL_NAME} characters, not {len(name)}.")
    if slugify(name) != name:
        raise ModelRequestError(f"The model name {name!r} may hold only lower-case letters, digits, '-' and '_'.")
    return name


def trained_models_request(*, study: Study, user, trials: list[Trial], method: str,
                           epoch_source: str = TrainedModel.EpochSource.DETECT, epoch_cap: int = 100,
                           name: str = "") -> list[TrainedModel]:
    """Queue one model per trial, each under its own name (`<study>-trial-<number>`; a name given is
    used as is for one trial and as `<name>-trial-<number>` for several); all of them or, on any
    problem, none."""
    name = check_model_name(name.strip()) if name.strip() else ""
    if method not in TrainedModel.Method.values:
        raise ModelRequestError(f"Unknown method {method!r}.")
    if method == TrainedModel.Method.RETRAIN and epoch_source not in TrainedModel.EpochSource.values:
        raise ModelRequestError(f"Unknown best-epoch source {epoch_source!r}.")
    if not 1 <= epoch_cap <= MAX_EPOCH_CAP:
        raise ModelRequestError(f"The epoch cap must be between 1 and {MAX_EPOCH_CAP}.")
    if not trials:
        raise ModelRequestError("The study has no completed trial to train a model from.")
    for trial in trials:
        if trial.study_id != study.id or trial.status not in (Trial.Status.COMPLETED, Trial.Status.PRUNED):
            raise ModelRequestError(f"Trial {trial.trial_id} has not completed; only completed (or pruned) trials "
                                    "make models.")
        if method == TrainedModel.Method.PROMOTE and trial.checkpoint_id is None:
            raise ModelRequestError(f"Trial {trial.trial_id} has no checkpoint to promote; retrain it instead.")
        if (method == TrainedModel.Method.RETRAIN and epoch_source == TrainedModel.EpochSource.RECORDED
                and not trial.best_epoch):
            raise ModelRequestError(f"Trial {trial.trial_id} has no recorded best epoch; detect it instead.")
    names = [name if name and len(trials) == 1 else trial_model_name(study, trial, base=name) for trial in trials]
    if len(set(names)) != len(names):
        raise ModelRequestError("A trial is picked twice.")
    with transaction.atomic():
        models = [
            TrainedModel.objects.create(
                team_id=study.team_id, dataset_id=study.dataset_id, study=study, trial=trial, name=model_name,
                version=last_version_locked(team_id=study.team_id, name=model_name) + 1, method=method,
                epoch_source=epoch_source if method == TrainedModel.Method.RETRAIN else "",
                epoch_cap=epoch_cap, seed=study.seed + trial.number, hyperparameters=trial.hyperparameters,
                created_by=user,
            )
            for trial, model_name in zip(trials, names, strict=True)
        ]
        for model in models:
            job_send(kind=JOB_KINDS["models"], row=model)
    return models


class ModelFileUnavailable(TuneboardError):
    """A stored model file that cannot be sent: corrupted or missing (the message says which)."""


@transaction.atomic
def model_file_download(*, model: TrainedModel, file: ModelFile):
    """Check a stored file before it is streamed (a first pass over its sha256, so a corrupted
    file is refused with a message instead of arriving broken), record the download in the audit
    log, and return the chunks to stream."""
    return model_artifact_download(model=model, artifact=file.artifact, label=file.get_format_display(),
                                   changes={"format": file.format}, remedy="Retrain or promote the trial again")


def model_artifact_download(*, model: TrainedModel, artifact, label: str, changes: dict, remedy: str):
    """As model_file_download, for any stored file of the model (a quantized variant's too); `remedy`: how to
    get a fresh copy."""
    try:
        artifact_verify(artifact=artifact)
    except ArtifactCorrupted:
        raise ModelFileUnavailable(f"The stored {label} file of {model} no longer matches its recorded sha256, so "
                                   f"it is not sent. {remedy} to make a fresh copy.") from None
    except ArtifactMissing:
        raise ModelFileUnavailable(f"The {label} file of {model} is missing from the artifact storage. "
                                   f"{remedy}.") from None
    audit_record(verb="model.download", obj=model, team_id=model.team_id, changes=changes)
    return artifact_iter_chunks(artifact=artifact)


def model_record_epoch(*, model_pk: int, attempt: int, phase: str, epoch: int, metrics: dict) -> bool:
    """Store one epoch's metrics; False when this attempt no longer owns the model (stop)."""
    return job_record_epoch(kind=JOB_KINDS["models"], pk=model_pk, attempt=attempt,
                            unique_fields=["model", "phase", "epoch"],
                            row=TrainedModelEpoch(model_id=model_pk, phase=phase, epoch=epoch, metrics=metrics))


def model_complete(*, model_pk: int, attempt: int, best_epoch: int | None, epochs: int | None, val_metrics: dict,
                   test_metrics: dict, signature: dict, versions: dict, files: dict[str, Artifact],
                   duration_seconds: float, report: dict | None = None, members: list[dict] | None = None,
                   compute: dict | None = None, environment: dict | None = None,
                   pending_formats: list[str] | tuple = ()) -> bool:
    """Everything at once: the row, its files and (for an ensemble) each member's weight and
    metrics, `members[i]` = {"weight", "val", "test"} in position order. False (and nothing
    written) when this attempt no longer owns the model. `pending_formats`: the formats its
    worker could not make (no TensorFlow there), queued as a conversion of its `.keras` file on a
    TensorFlow worker (services/conversions.py) in the same transaction."""
    with transaction.atomic():
        done = job_move(kind=JOB_KINDS["models"], pk=model_pk, target=JobStatus.COMPLETED, attempt=attempt,
                        best_epoch=best_epoch, epochs=epochs, val_metrics=val_metrics, test_metrics=test_metrics,
                        signature=signature, versions=versions, duration_seconds=duration_seconds, report=report or {},
                        compute=compute or {}, environment=environment or {}, finished=timezone.now())
        if done:
            ModelFile.objects.bulk_create(
                [ModelFile(model_id=model_pk, format=fmt, artifact=artifact) for fmt, artifact in files.items()]
            )
            rows = EnsembleMember.objects.filter(ensemble_id=model_pk).order_by("position")
            for row, result in zip(rows, members or [], strict=False):
                row.weight, row.val_metrics, row.test_metrics = result["weight"], result["val"], result["test"]
                row.save(update_fields=["weight", "val_metrics", "test_metrics"])
            if pending_formats:
                conversion_request(model=TrainedModel(pk=model_pk), formats=pending_formats)
            notify_model_ready(model_pk=model_pk)
            # Recipe runs waiting on this retrain, or building this ensemble, move with it.
            model_finished.send(sender=TrainedModel, model_pk=model_pk, status=JobStatus.COMPLETED)
    return done


class ModelCancelError(TuneboardError):
    pass


@transaction.atomic
def model_cancel(*, model: TrainedModel) -> None:
    """A user stops a queued or running model; a running worker stops at its next epoch end."""
    if not job_cancel(kind=JOB_KINDS["models"], pk=model.pk):
        model.refresh_from_db(fields=["status"])
        raise ModelCancelError(f"The model is {model.get_status_display().lower()}; only a queued or running "
                               "model can be cancelled.")
    audit_record(verb="model.cancel", obj=model, team_id=model.team_id)
    model_finished.send(sender=TrainedModel, model_pk=model.pk, status=JobStatus.CANCELLED,
                        error="Cancelled by a user.")
