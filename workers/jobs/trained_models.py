"""One train-model task's work: retrain a trial's configuration on train+validation for 1.2x its best
epoch (or promote its checkpoint, or build an ensemble) and store every serving format."""

import logging
import tempfile
from pathlib import Path

import numpy as np
from django.conf import settings

from experiments.selectors.training_inputs import TrainingPhase
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path, artifacts_delete
from experiments.services.connections import with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.trained_models import model_complete, model_record_epoch
from experiments.tuning.compute_options import ComputeSettings
from workers import hypermodels
from workers.ensembles.build import build_ensemble
from workers.export.formats import export_model
from workers.host.environment import environment_record
from workers.host.shutdown import stop_requested
from workers.host.versions import package_versions
from workers.hypermodels.base import DataInfo
from workers.jobs.runner import JobRun, JobWork
from workers.training.dataset_cache import load_dataset
from workers.training.fitting import describe, detect_best_epoch, train_on_train_and_validation
from workers.training.inference import evaluate
from workers.training.model_building import build_model, model_from_trial_checkpoint, study_hyperparameters

log = logging.getLogger(__name__)
RETRAIN_EPOCH_FACTOR = 1.2


def _without_val_prefix(logs: dict) -> dict:
    return {k.removeprefix("val_"): v for k, v in logs.items() if k.startswith("val_")}


def _reporter(row, phase: str):
    def report(epoch: int, logs: dict) -> bool:
        owned = with_db_retry(model_record_epoch, model_pk=row.pk, attempt=row.attempts, phase=phase, epoch=epoch,
                              metrics=logs)
        return owned and not stop_requested()

    return report


def _promote(row, data, workdir: Path):
    """The trial's best-epoch weights as they are: no training at all."""
    model = model_from_trial_checkpoint(row.trial, workdir)
    val_metrics = evaluate(model, data.x_val, data.y_val, row.study.batch_size)
    return model, row.trial.best_epoch, row.trial.best_epoch, val_metrics


def _retrain(row, hp, data, info: DataInfo):
    study = row.study
    fit = hypermodels.fit_function(study.hypermodel, hp)
    if row.epoch_source == row.EpochSource.RECORDED:
        best_epoch, val_metrics = row.trial.best_epoch, _without_val_prefix(row.trial.metrics)
    else:
        best_epoch, logs = detect_best_epoch(
            build=lambda: build_model(study, hp, info), data=data, batch_size=study.batch_size,
            epoch_cap=row.epoch_cap, seed=row.seed, fit=fit, time_limit_seconds=settings.MAX_TRIAL_SECONDS,
            report=_reporter(row, TrainingPhase.BEST_EPOCH), compute=ComputeSettings.from_study(study),
        )
        val_metrics = _without_val_prefix(logs)
    epochs = max(1, int(best_epoch * RETRAIN_EPOCH_FACTOR))
    # Normalisation is adapted on the rows the final model trains on: train+validation.
    both = DataInfo.from_training_split(np.concatenate([data.x_train, data.x_val]), info.task, info.n_classes,
                                        kind=info.kind)
    model = train_on_train_and_validation(
        build=lambda: build_model(study, hp, both), data=data, batch_size=study.batch_size,
        epochs=epochs, seed=row.seed, fit=fit, report=_reporter(row, TrainingPhase.RETRAIN),
        time_limit_seconds=settings.MAX_TRIAL_SECONDS, compute=ComputeSettings.from_study(study),
    )
    return model, best_epoch, epochs, val_metrics


def _single_model(row, workdir: Path) -> dict:
    study = row.study
    data, info = load_dataset(row.dataset)
    hp = study_hyperparameters(study, row.hyperparameters)
    if row.method == row.Method.PROMOTE:
        model, best_epoch, epochs, val_metrics = _promote(row, data, workdir)
    else:
        model, best_epoch, epochs, val_metrics = _retrain(row, hp, data, info)
    test_metrics = evaluate(model, data.x_test, data.y_test, study.batch_size)
    # Promoted models ran where their trial did; retrained ones here, with the study's settings.
    compute = (row.trial.compute if row.method == row.Method.PROMOTE
               else describe(ComputeSettings.from_study(study), study.batch_size))
    return {"best_epoch": best_epoch, "epochs": epochs, "val_metrics": val_metrics, "test_metrics": test_metrics,
            "compute": compute, "exported": export_model(model, workdir=workdir, name=row.name, version=row.version)}


def _environment(row, compute: dict) -> dict:
    record = environment_record(dataset=row.dataset, seed=row.seed, compute=compute,
                                hypermodel=None if row.is_ensemble else row.study.hypermodel)
    if row.method == row.Method.PROMOTE and row.trial.environment:
        # Its weights are the trial's: how they were made is the trial's record; this worker only exported them.
        return {**row.trial.environment, "exported_on": {"host": record["host"], "versions": record["versions"]}}
    return record


def _work(run: JobRun) -> bool:
    import keras

    row = run.row
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        keras.utils.set_random_seed(row.seed)
        if row.is_ensemble:
            built = build_ensemble(row, workdir=workdir)
            exported = built.pop("exported")
            result = {"best_epoch": None, "epochs": None, "compute": describe(None), **built}
        else:
            result = _single_model(row, workdir)
            exported = result.pop("exported")
        files = {
            fmt: artifact_create_from_path(team=row.team, kind=ArtifactKind.MODEL, path=path)
            for fmt, path in exported.files.items()
        }
        signature = {**exported.signature, "unavailable": exported.unavailable}
        if with_db_retry(model_complete, model_pk=run.pk, attempt=run.attempt, signature=signature,
                         pending_formats=exported.pending,
                         versions=package_versions(), files=files, environment=_environment(row, result["compute"]),
                         duration_seconds=run.seconds(), **result):
            return True
        # Requeued after a stale heartbeat, or cancelled, while we worked: not ours to store.
        artifacts_delete(artifacts=files.values())
        return False


WORK = JobWork(_work)


def make_trained_model(*, model_pk: int) -> str:
    return WORK.run(JOB_KINDS["models"], model_pk)
