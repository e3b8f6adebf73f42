"""Trained models: the web's requests to retrain or promote trials, and their names and versions; what happens
to a request afterwards is services/model_runs.py."""

from django.db import transaction
from django.db.models import Max
from django.utils.text import slugify

from experiments.errors import TuneboardError
from experiments.models import ModelFile, Study, Team, TrainedModel, Trial
from experiments.selectors.artifacts import ArtifactCorrupted, ArtifactMissing, artifact_iter_chunks, artifact_verify
from experiments.services.audit import audit_record
from experiments.services.jobs import JOB_KINDS, job_send

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
    label = file.get_format_display()
    try:
        artifact_verify(artifact=file.artifact)
    except ArtifactCorrupted:
        raise ModelFileUnavailable(f"The stored {label} file of {model} no longer matches its recorded sha256, so "
                                   "it is not sent. Retrain or promote the trial again to make a fresh copy.") from None
    except ArtifactMissing:
        raise ModelFileUnavailable(f"The {label} file of {model} is missing from the artifact storage. Retrain or "
                                   "promote the trial again.") from None
    audit_record(verb="model.download", obj=model, team_id=model.team_id, changes={"format": file.format})
    return artifact_iter_chunks(artifact=file.artifact)
