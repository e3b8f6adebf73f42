"""One batch prediction, on a worker of the model's queue: load the model's `.keras` file, predict
the stored inputs a chunk of rows at a time (reporting the rows done after each, which is also
where a cancel stops it), and store the predictions as CSV and NPZ."""

import io
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from django.conf import settings

from experiments.errors import TuneboardError
from experiments.presentation.prediction_csv import predicted_labels, prediction_preview, write_prediction_csv
from experiments.services.artifacts import (
    ArtifactKind,
    artifact_copy_to_path,
    artifact_create_from_path,
    artifact_read_bytes,
    artifacts_delete,
)
from experiments.services.connections import connections_close_expired, with_db_retry
from experiments.services.predictions import (
    prediction_claim,
    prediction_complete,
    prediction_fail,
    prediction_heartbeat,
    prediction_progress,
    prediction_release,
)
from workers.shutdown import stop_requested
from workers.support import Heartbeat, failure_reason, release_memory
from workers.versions import package_versions

# Rows per predict step: large enough that a small model's per-step overhead vanishes, small
# enough for an image model's activations.
STEP_ROWS = 512
# Steps per chunk: one predict call and one progress write per chunk (a cancel stops the job
# at the next chunk).
STEPS_PER_CHUNK = 8


class PredictionStopped(TuneboardError):
    """Cancelled by a user, or queued again by the reaper, while predicting."""


class NoModelFile(TuneboardError):
    pass


def _load(keras, path: Path):
    # As workers/conversions.py: the forward pass only, and Tuneboard's own file (Lambda layers).
    return keras.saving.load_model(path, compile=False, safe_mode=False)


def predict_rows(model, x: np.ndarray, *, progress: Callable[[int], bool] | None = None,
                 step_rows: int = STEP_ROWS) -> np.ndarray:
    """The model's outputs for every row of x, a chunk at a time; `progress(rows_done)` after each
    chunk, and False from it stops (PredictionStopped). The path a job takes, and the benchmark's."""
    from workers.training import predict

    chunk = step_rows * STEPS_PER_CHUNK
    parts = []
    for start in range(0, len(x), chunk):
        parts.append(np.asarray(predict(model, x[start:start + chunk], step_rows)))
        if progress is not None and not progress(min(start + chunk, len(x))):
            raise PredictionStopped(f"stopped after {start + chunk} rows")
    return np.concatenate(parts) if parts else np.empty((0,))


def _inputs(row) -> tuple[np.ndarray, list[str]]:
    with np.load(io.BytesIO(artifact_read_bytes(artifact=row.inputs)), allow_pickle=False) as npz:
        names = [str(name) for name in npz["names"]] if "names" in npz.files else []
        return npz["x"], names


def _store(row, outputs: np.ndarray, names: list[str], workdir: Path) -> dict:
    dataset = row.model.dataset
    csv_path = workdir / f"predictions-{row.pk}.csv"
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        write_prediction_csv(handle, outputs, task=dataset.task, classes=dataset.classes, names=names)
    npz_path = workdir / f"predictions-{row.pk}.npz"
    arrays = {"predictions": outputs}
    if dataset.task == "classification":
        arrays["labels"] = np.asarray(dataset.classes)[predicted_labels(outputs, len(dataset.classes))]
    np.savez_compressed(npz_path, **arrays)
    team = row.model.team
    return {
        "predictions_csv": artifact_create_from_path(team=team, kind=ArtifactKind.BATCH_PREDICTIONS, path=csv_path),
        "predictions_npz": artifact_create_from_path(team=team, kind=ArtifactKind.BATCH_PREDICTIONS, path=npz_path),
        "preview": prediction_preview(outputs, task=dataset.task, classes=dataset.classes, names=names),
    }


def predict_batch(*, prediction_pk: int) -> str:
    import keras

    connections_close_expired()
    row = with_db_retry(prediction_claim, prediction_pk=prediction_pk, worker_host=socket.gethostname())
    if row is None:
        return "nothing to do"  # a duplicated delivery, or another worker has it
    attempt = row.attempts
    if stop_requested() and with_db_retry(prediction_release, prediction_pk=prediction_pk, attempt=attempt):
        return "released"
    environment = {"host": socket.gethostname(), "versions": package_versions()}
    started = time.monotonic()
    heartbeat = Heartbeat(lambda: prediction_heartbeat(prediction_pk=prediction_pk, attempt=attempt),
                          settings.TRIAL_HEARTBEAT_SECONDS, name=f"heartbeat-prediction-{prediction_pk}")
    heartbeat.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if row.keras_artifact is None:
                raise NoModelFile(f"Model {row.model} has no .keras file to predict with.")
            model = _load(keras, artifact_copy_to_path(artifact=row.keras_artifact, path=Path(tmp) / "model.keras"))
            x, names = _inputs(row)
            outputs = predict_rows(model, x, progress=lambda done: with_db_retry(
                prediction_progress, prediction_pk=prediction_pk, attempt=attempt, rows_done=done))
            stored = _store(row, outputs, names, Path(tmp))
            if with_db_retry(prediction_complete, prediction_pk=prediction_pk, attempt=attempt, **stored,
                             environment=environment, duration_seconds=time.monotonic() - started):
                return "completed"
            artifacts_delete(artifacts=[stored["predictions_csv"], stored["predictions_npz"]])
            return "superseded"  # cancelled or requeued while the files were written
    except PredictionStopped:
        return "stopped"  # cancelled or requeued: the row already says so
    except Exception as exc:  # any crash becomes a readable FAILED prediction
        with_db_retry(prediction_fail, prediction_pk=prediction_pk, attempt=attempt, environment=environment,
                      error=failure_reason(exc, job=f"prediction {prediction_pk}"))
    finally:
        heartbeat.stop()
        release_memory(keras, trial_seconds=time.monotonic() - started)
    return "failed"
