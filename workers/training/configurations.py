"""A study's configuration (its hyperparameter values) trained as the search trains it, for a trial
and its re-runs alike: its TrialSpec, the environment record of the run, and the training itself."""

from dataclasses import asdict
from pathlib import Path

from django.conf import settings

from experiments.selectors.artifacts import artifact_copy_to_path
from experiments.selectors.training_inputs import trial_checkpoint_continued
from experiments.tuning.compute_options import ComputeSettings
from experiments.tuning.objectives import needs_latency
from workers import hypermodels
from workers.host.environment import environment_record
from workers.training import checkpoints
from workers.training.dataset_cache import load_dataset
from workers.training.fitting import TrialResult, TrialSpec, describe, run_trial
from workers.training.model_building import build_model
from workers.trial_stops import TrialFailed


def _warm_start(study, values: dict, workdir: Path) -> Path | None:
    parent_id = values.get("tuner/trial_id")
    if not parent_id:
        return None
    checkpoint = trial_checkpoint_continued(study=study, trial_id=parent_id)
    if checkpoint is None:
        raise TrialFailed(f"Hyperband continues trial {parent_id}, but its checkpoint is missing.")
    return artifact_copy_to_path(artifact=checkpoint, path=workdir / f"warm-start{checkpoints.SUFFIX}")


def trial_spec(study, values: dict, *, seed: int) -> TrialSpec:
    """How a configuration of the study trains: epochs (Hyperband's own, when it set them),
    early stopping, batch size, executions and the seed."""
    return TrialSpec(
        objective=study.objective_metric, direction=study.objective_direction,
        epochs=int(values.get("tuner/epochs", study.epochs)), initial_epoch=int(values.get("tuner/initial_epoch", 0)),
        batch_size=study.batch_size, patience=study.patience, executions=study.executions_per_trial, seed=seed,
        time_limit_seconds=settings.MAX_TRIAL_SECONDS, measure_latency=needs_latency(study),
    )


def run_environment(study, spec: TrialSpec) -> dict:
    """The environment record of a run of the study's configuration in this child."""
    try:
        compute = describe(ComputeSettings.from_study(study), study.batch_size)
    except TrialFailed:
        compute = None  # no such device here: the run fails with the reason, the rest still holds
    return environment_record(dataset=study.dataset, seed=spec.seed, hypermodel=study.hypermodel, compute=compute,
                              training=training_settings(spec))


def train_configuration(study, hp, *, spec: TrialSpec, reporter, workdir: Path, resume=None) -> TrialResult:
    """One configuration trained as the search trains it: the trial and its re-runs alike (`resume`: a
    fitting.Resume, where a preempted attempt of the trial stopped)."""
    data, info = load_dataset(study.dataset)
    return run_trial(
        build=lambda: build_model(study, hp, info), spec=spec, data=data, reporter=reporter, workdir=workdir,
        warm_start=None if resume else _warm_start(study, dict(hp.values), workdir),
        fit=hypermodels.fit_function(study.hypermodel, hp), compute=ComputeSettings.from_study(study), resume=resume,
    )


def training_settings(spec: TrialSpec) -> dict:
    """The settings a trial trains with, without the seed (kept on its own), the server's time
    limit and whether its latency is measured (after training: the model is the same either way)."""
    values = asdict(spec)
    for name in ("seed", "time_limit_seconds", "measure_latency"):
        values.pop(name)
    return values
