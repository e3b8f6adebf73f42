"""A study's hyperparameter values become a Keras model here, and only here: for trials,
retrains, promotions and ensemble members alike."""

from pathlib import Path

from experiments.selectors.artifacts import artifact_copy_to_path
from workers import hypermodels
from workers.training import checkpoints
from workers.training.dataset_cache import load_dataset
from workers.trial_stops import TrialFailed
from workers.tuners.hyperparameters import to_hyperparameters


def study_hyperparameters(study, values: dict):
    """The study's space as the oracle has it, holding these values."""
    hp = to_hyperparameters(study.search_space)
    hp.values = dict(values)
    return hp


def build_model(study, hp, info):
    return hypermodels.build(study.hypermodel, hp, info)


def model_from_trial_checkpoint(trial, workdir: Path):
    """The trial's best-epoch weights in a model rebuilt from its hyperparameters (the
    architecture is deterministic given them; normalisation adapts on the training split)."""
    study = trial.study
    _, info = load_dataset(study.dataset)
    model = build_model(study, study_hyperparameters(study, trial.hyperparameters), info)
    path = artifact_copy_to_path(artifact=trial.checkpoint, path=workdir / f"trial-{trial.pk}{checkpoints.SUFFIX}")
    try:
        checkpoints.restore(model, path)
    except checkpoints.CheckpointMismatch as exc:
        raise TrialFailed(str(exc)) from exc
    return model
