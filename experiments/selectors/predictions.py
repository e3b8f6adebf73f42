"""Reads of batch predictions: one of a team's jobs, a model's recent ones, and what a model takes
as input (its dataset's kind, feature names and input shape)."""

from experiments.datasets.inputs import ModelInputSpec
from experiments.models import PredictionJob, Team, TrainedModel

RECENT = 10


def team_prediction(*, team: Team, prediction_id: int) -> PredictionJob | None:
    return (PredictionJob.objects.select_related("model__dataset", "predictions_csv", "predictions_npz",
                                                 "registry_version__registered_model", "variant")
            .filter(pk=prediction_id, team=team).first())


def model_predictions(*, model: TrainedModel, limit: int = RECENT) -> list[PredictionJob]:
    """The model's latest prediction jobs, batch uploads and "Try it" alike, newest first."""
    return list(PredictionJob.objects.filter(model=model).order_by("-created", "-id")[:limit])


def model_input_spec(*, model: TrainedModel) -> ModelInputSpec:
    dataset = model.dataset
    return ModelInputSpec(kind=dataset.kind, input_shape=list(dataset.input_shape),
                          feature_names=list(dataset.feature_names))
