"""Reads of trained models: the model list, a study's models, a model page's figures and the
conversion that makes a model's TensorFlow formats after it trained without TensorFlow."""

from django.db.models import Count, QuerySet

from experiments.models import ModelConversion, ModelFile, Study, Team, TrainedModel, TrainedModelEpoch
from experiments.presentation import study_charts
from experiments.selectors.trials import trial_epoch_rows


def team_models(*, team: Team) -> QuerySet[TrainedModel]:
    return (TrainedModel.objects.filter(team=team).select_related("study", "trial", "dataset")
            .annotate(member_count=Count("members")).order_by("-created"))


def study_models(*, study: Study, limit: int = 10) -> tuple[list[TrainedModel], int]:
    """The latest models made from the study, and how many there are in all."""
    models = TrainedModel.objects.filter(study=study)
    latest = list(models.select_related("trial").only(
        "id", "name", "version", "status", "test_metrics", "created", "trial__trial_id", "trial__number")
        .order_by("-created")[:limit])
    return latest, models.count()


def model_epoch_rows(*, model: TrainedModel) -> list[dict]:
    return list(model.epoch_rows.values("phase", "epoch", "metrics"))


def model_learning_curves(*, model: TrainedModel, epoch_rows: list[dict]) -> dict | None:
    """The model page's chart: per phase for a retrain (best-epoch detection, then the retrain
    on train+validation); a promoted model's are its trial's (it trained no further)."""
    if model.is_ensemble:
        return None
    if model.method == TrainedModel.Method.PROMOTE and model.trial_id:
        rows = trial_epoch_rows(trial=model.trial)
        series = study_charts.series_by(rows, "execution", lambda e: f"search trial, execution {e + 1}")
        marks = [{"epoch": model.trial.best_epoch, "label": "best epoch"}] if model.trial.best_epoch else []
    else:
        labels = dict(TrainedModelEpoch.Phase.choices)
        series = study_charts.series_by(epoch_rows, "phase", lambda p: labels.get(p, p))
        marks = []
        if model.best_epoch and model.epoch_source == TrainedModel.EpochSource.DETECT:
            marks.append({"epoch": model.best_epoch, "label": "best epoch"})
        detected = [row["epoch"] + 1 for row in epoch_rows if row["phase"] == TrainedModelEpoch.Phase.BEST_EPOCH]
        if detected and max(detected) >= model.epoch_cap:  # drawn only where it stopped the detection
            marks.append({"epoch": model.epoch_cap, "label": "epoch cap"})
    return study_charts.learning_curves(series, task=model.dataset.task, marks=marks)


def model_files(*, model: TrainedModel) -> list[ModelFile]:
    return list(model.files.select_related("artifact"))


def team_model(*, team: Team, model_id: int) -> TrainedModel | None:
    return (TrainedModel.objects.select_related("study", "trial", "dataset", "team")
            .filter(pk=model_id, team=team).first())


def model_conversion(*, model: TrainedModel) -> ModelConversion | None:
    """The model's latest conversion, or None (it trained where every format could be made).
    Reads `prefetch_related("conversions")` where the caller did it (the API's list)."""
    rows = list(model.conversions.all())  # ordered by id; a model has one, or a few after failures
    return rows[-1] if rows else None


def downloads_unavailable(*, model: TrainedModel, conversion: ModelConversion | None) -> dict[str, str]:
    """The formats the model page lists as not offered, with why: the signature's, less those a
    conversion that has not completed is still to make (the conversion's own line says how it goes)."""
    unavailable = model.signature.get("unavailable") or {}
    if conversion is None or conversion.status == ModelConversion.Status.COMPLETED:
        return dict(unavailable)
    return {fmt: why for fmt, why in unavailable.items() if fmt not in conversion.formats}


def keras_model_problem(model: TrainedModel, *, once: str, use: str) -> str:
    """Why `model` cannot yet be used from its `.keras` file ("Model m v1 has not finished training (...); `once`
    once it has completed", "... has no .keras file to `use`"), or ""."""
    if model.status != TrainedModel.Status.COMPLETED:
        return f"Model {model} has not finished training ({model.get_status_display().lower()}); {once} once it " \
               "has completed."
    if not model.files.filter(format=ModelFile.Format.KERAS).exists():
        return f"Model {model} has no .keras file to {use}."
    return ""
