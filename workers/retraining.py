"""One train-model task: make a TrainedModel from its trial's configuration and store every
serving format. The recipe (DESIGN.md): find the best epoch (EarlyStopping on val_loss,
patience 10) or take the trial's, train a fresh model on train+validation for
int(1.2 x best epoch) epochs, evaluate once on the test split. Promoting skips training and
exports the trial's own best-epoch weights."""

import logging
import socket
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from experiments.models import Artifact, TrainedModel, TrainedModelEpoch
from experiments.services.artifacts import artifact_copy_to_path, artifact_create_from_path
from experiments.services.trained_models import (
    trained_model_claim,
    trained_model_complete,
    trained_model_fail,
    trained_model_heartbeat,
    trained_model_record_epoch,
)
from workers import checkpoints, hypermodels
from workers.ensembling import build_ensemble
from workers.export import export_model, package_versions
from workers.hypermodels.base import DataInfo
from workers.hyperparameters import to_hyperparameters
from workers.support import Heartbeat, load_dataset, release_memory, with_db_retry
from workers.training import (
    TrialCancelled,
    TrialFailed,
    detect_best_epoch,
    evaluate,
    train_on_train_and_validation,
)

log = logging.getLogger(__name__)
RETRAIN_EPOCH_FACTOR = 1.2


def _without_val_prefix(logs: dict) -> dict:
    return {k.removeprefix("val_"): v for k, v in logs.items() if k.startswith("val_")}


def _reporter(model_pk: int, phase: str):
    def report(epoch: int, logs: dict) -> bool:
        return with_db_retry(trained_model_record_epoch, model_pk=model_pk, phase=phase, epoch=epoch, metrics=logs)

    return report


def model_from_trial_checkpoint(trial, workdir: Path):
    """The trial's best-epoch weights in a model rebuilt from its hyperparameters (the
    architecture is deterministic given them; normalisation adapts on the training split)."""
    study = trial.study
    _, info = load_dataset(study.dataset)
    hp = to_hyperparameters(study.search_space)
    hp.values = dict(trial.hyperparameters)
    model = hypermodels.build(study.hypermodel, hp, info)
    path = artifact_copy_to_path(artifact=trial.checkpoint, path=workdir / f"trial-{trial.pk}{checkpoints.SUFFIX}")
    try:
        checkpoints.restore(model, path)
    except checkpoints.CheckpointMismatch as exc:
        raise TrialFailed(str(exc)) from exc
    return model


def _promote(row: TrainedModel, data, workdir: Path):
    """The trial's best-epoch weights as they are: no training at all."""
    model = model_from_trial_checkpoint(row.trial, workdir)
    val_metrics = evaluate(model, data.x_val, data.y_val, row.study.batch_size)
    return model, row.trial.best_epoch, row.trial.best_epoch, val_metrics


def _retrain(row: TrainedModel, hp, data, info: DataInfo):
    study = row.study
    fit = hypermodels.fit_function(study.hypermodel, hp)
    if row.epoch_source == TrainedModel.EpochSource.RECORDED:
        best_epoch, val_metrics = row.trial.best_epoch, _without_val_prefix(row.trial.metrics)
    else:
        best_epoch, logs = detect_best_epoch(
            build=lambda: hypermodels.build(study.hypermodel, hp, info), data=data, batch_size=study.batch_size,
            epoch_cap=row.epoch_cap, seed=row.seed, fit=fit,
            report=_reporter(row.pk, TrainedModelEpoch.Phase.BEST_EPOCH),
        )
        val_metrics = _without_val_prefix(logs)
    epochs = max(1, int(best_epoch * RETRAIN_EPOCH_FACTOR))
    # Normalisation is adapted on the rows the final model trains on: train+validation.
    both = DataInfo.from_training_split(np.concatenate([data.x_train, data.x_val]), info.task, info.n_classes)
    model = train_on_train_and_validation(
        build=lambda: hypermodels.build(study.hypermodel, hp, both), data=data, batch_size=study.batch_size,
        epochs=epochs, seed=row.seed, fit=fit, report=_reporter(row.pk, TrainedModelEpoch.Phase.RETRAIN),
    )
    return model, best_epoch, epochs, val_metrics


def _single_model(row: TrainedModel, workdir: Path) -> dict:
    study = row.study
    data, info = load_dataset(row.dataset)
    hp = to_hyperparameters(study.search_space)
    hp.values = dict(row.hyperparameters)
    if row.method == TrainedModel.Method.PROMOTE:
        model, best_epoch, epochs, val_metrics = _promote(row, data, workdir)
    else:
        model, best_epoch, epochs, val_metrics = _retrain(row, hp, data, info)
    test_metrics = evaluate(model, data.x_test, data.y_test, study.batch_size)
    return {"best_epoch": best_epoch, "epochs": epochs, "val_metrics": val_metrics, "test_metrics": test_metrics,
            "exported": export_model(model, workdir=workdir, name=row.name, version=row.version)}


def make_trained_model(*, model_pk: int) -> str:
    import keras

    close_old_connections()
    stale_before = timezone.now() - timedelta(seconds=settings.TRIAL_STALE_SECONDS)
    row = with_db_retry(trained_model_claim, model_pk=model_pk, worker_host=socket.gethostname(),
                        stale_before=stale_before)
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: trained_model_heartbeat(model_pk=model_pk), settings.TRIAL_HEARTBEAT_SECONDS,
                          name=f"heartbeat-model-{model_pk}")
    heartbeat.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            keras.utils.set_random_seed(row.seed)
            if row.is_ensemble:
                built = build_ensemble(row, workdir=workdir)
                exported = built.pop("exported")
                result = {"best_epoch": None, "epochs": None, **built}
            else:
                result = _single_model(row, workdir)
                exported = result.pop("exported")
            files = {
                fmt: artifact_create_from_path(team=row.team, kind=Artifact.Kind.MODEL, path=path)
                for fmt, path in exported.files.items()
            }
            with_db_retry(trained_model_complete, model_pk=model_pk, signature=exported.signature,
                          versions=package_versions(), files=files, duration_seconds=time.monotonic() - started,
                          **result)
        return "completed"
    except TrialCancelled:
        return "superseded"  # the row stopped being ours (requeued after a stale heartbeat)
    except TrialFailed as exc:
        with_db_retry(trained_model_fail, model_pk=model_pk, error=str(exc))
    except MemoryError:
        with_db_retry(trained_model_fail, model_pk=model_pk,
                      error="Training ran out of memory; try a smaller batch size.")
    except Exception as exc:  # any crash becomes a readable FAILED model
        log.exception("model %s crashed", model_pk)
        with_db_retry(trained_model_fail, model_pk=model_pk, error=f"{type(exc).__name__}: {exc}")
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)
    return "failed"
