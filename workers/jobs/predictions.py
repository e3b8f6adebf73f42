"""One batch prediction, on a worker of the model's queue: load the model's `.keras` file, predict
the stored inputs a chunk of rows at a time (reporting the rows done after each, which is also
where a cancel stops it), and store the predictions as CSV and NPZ."""

import io
import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from experiments.datasets.arrays import strings_from_arrays
from experiments.errors import TuneboardError
from experiments.presentation.prediction_csv import predicted_labels, prediction_preview, write_prediction_csv
from experiments.selectors.artifacts import artifact_copy_to_path, artifact_read_bytes
from experiments.services.artifacts import ArtifactKind, artifact_create_from_path, artifacts_delete
from experiments.services.connections import connection_close, with_db_retry
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.predictions import prediction_complete, prediction_progress
from workers.host.shutdown import stop_requested
from workers.jobs.runner import JobRun, JobWork, host_environment
from workers.trial_stops import TrialCancelled

log = logging.getLogger(__name__)
# Rows per predict step: large enough that a small model's per-step overhead vanishes, small
# enough for an image model's activations.
STEP_ROWS = 512
# Steps per chunk: one predict call and one progress write per chunk (a cancel stops the job
# at the next chunk).
STEPS_PER_CHUNK = 8


class PredictionStopped(TrialCancelled):
    """Cancelled by a user, queued again by the reaper, or its worker stopping, while predicting."""


class NoModelFile(TuneboardError):
    pass


def _load(keras, path: Path):
    # As workers/jobs/conversions.py: the forward pass only, and Tuneboard's own file (Lambda layers).
    return keras.saving.load_model(path, compile=False, safe_mode=False)


class ProgressWriter(threading.Thread):
    """Writes the rows done from a thread of its own, so predicting never waits on the database:
    `report(n)` notes the latest count and the thread writes it (coalescing counts that arrive
    while it writes). Its write is fenced: once it answers False (cancelled, or queued again),
    `stopped` is set and the predict stops at its next step."""

    def __init__(self, progress: Callable[[int], bool]):
        super().__init__(daemon=True, name="prediction-progress")
        self.progress = progress
        self.stopped = False
        self._latest: int | None = None
        self._written: int | None = None
        self._wake = threading.Event()
        self._closing = False

    def report(self, rows_done: int) -> None:
        self._latest = rows_done
        self._wake.set()

    def run(self) -> None:
        try:
            while True:
                self._wake.wait()
                self._wake.clear()
                latest = self._latest
                if latest is not None and latest != self._written and not self.stopped:
                    try:
                        self.stopped = not self.progress(latest)
                    except Exception:  # a database blip: the next count, or the heartbeat, tries again
                        log.warning("progress of a prediction could not be written", exc_info=True)
                        connection_close()
                    self._written = latest
                if self._closing:
                    return
        finally:
            connection_close()

    def close(self) -> None:
        """Write what is pending, then end."""
        self._closing = True
        self._wake.set()
        self.join(timeout=30)


def _progress_callback(keras, writer: ProgressWriter, rows: int, step_rows: int):
    """Reports the rows done every STEPS_PER_CHUNK steps; stops predicting (at the end of the
    current step) once the writer heard the job is no longer this worker's, or the worker is
    shutting down (the runner hands the job back)."""

    class Progress(keras.callbacks.Callback):
        def on_predict_batch_end(self, batch, logs=None):
            if stop_requested():
                writer.stopped = True
            if writer.stopped:
                self.model.stop_predicting = True
            elif (batch + 1) % STEPS_PER_CHUNK == 0:
                writer.report(min((batch + 1) * step_rows, rows))

    return Progress()


def predict_rows(model, x: np.ndarray, *, progress: Callable[[int], bool] | None = None,
                 step_rows: int = STEP_ROWS) -> np.ndarray:
    """The model's outputs for every row of x, in one predict over steps of `step_rows`;
    `progress(rows_done)` every STEPS_PER_CHUNK steps (from a thread: predicting never waits on
    it), and False from it stops the predict (PredictionStopped). The path a job takes, and the
    benchmark's."""
    import keras

    from workers.training.inference import predict

    if progress is None:
        return np.asarray(predict(model, x, step_rows))
    writer = ProgressWriter(progress)
    writer.start()
    try:
        outputs = np.asarray(predict(model, x, step_rows, callbacks=[_progress_callback(keras, writer, len(x),
                                                                                         step_rows)]))
    finally:
        writer.close()
    if writer.stopped:
        raise PredictionStopped(f"stopped after {len(outputs)} rows")
    return outputs


def _inputs(row) -> tuple[np.ndarray, list[str]]:
    with np.load(io.BytesIO(artifact_read_bytes(artifact=row.inputs)), allow_pickle=False) as npz:
        names = strings_from_arrays(npz["names_utf8"], npz["names_ends"]) if "names_utf8" in npz.files else []
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


def predict_tflite_rows(runner, x: np.ndarray, *, progress: Callable[[int], bool]) -> np.ndarray:
    """A TFLite variant's outputs for every row, a chunk of rows at a time; after each chunk the rows done are
    written (False: stop, as predict_rows stops), and a stopping worker stops there too."""
    chunk = STEP_ROWS * STEPS_PER_CHUNK
    outputs = []
    for start in range(0, len(x), chunk):
        outputs.append(runner(x[start:start + chunk], batch_size=STEP_ROWS))
        done = min(start + chunk, len(x))
        try:
            owned = progress(done)
        except Exception:  # a database blip, as ProgressWriter rides it out: the next chunk, or the heartbeat, tries
            log.warning("progress of a prediction could not be written", exc_info=True)
            connection_close()
            owned = True
        if stop_requested() or not owned:
            raise PredictionStopped(f"stopped after {done} rows")
    return np.concatenate(outputs)


def _outputs(keras, row, x: np.ndarray, workdir: Path, progress: Callable[[int], bool]) -> np.ndarray:
    """The float model's outputs, or those of the quantized variant the job names."""
    variant = row.variant
    if variant is not None and variant.is_tflite:
        from workers.export.quantization import TfliteRunner

        flatbuffer = artifact_read_bytes(artifact=variant.artifact)
        return predict_tflite_rows(TfliteRunner(flatbuffer), x, progress=progress)
    artifact = variant.artifact if variant is not None else row.keras_artifact
    if artifact is None:
        raise NoModelFile(f"Model {row.model} has no .keras file to predict with.")
    model = _load(keras, artifact_copy_to_path(artifact=artifact, path=workdir / "model.keras"))
    return predict_rows(model, x, progress=progress)


def _work(run: JobRun) -> bool:
    import keras

    row = run.row
    with tempfile.TemporaryDirectory() as tmp:
        x, names = _inputs(row)
        outputs = _outputs(keras, row, x, Path(tmp), lambda done: with_db_retry(
            prediction_progress, prediction_pk=run.pk, attempt=run.attempt, rows_done=done))
        stored = _store(row, outputs, names, Path(tmp))
        if with_db_retry(prediction_complete, prediction_pk=run.pk, attempt=run.attempt, **stored,
                         environment=run.environment, duration_seconds=run.seconds()):
            return True
        artifacts_delete(artifacts=[stored["predictions_csv"], stored["predictions_npz"]])
        return False  # cancelled or requeued while the files were written


WORK = JobWork(_work, environment=host_environment)


def predict_batch(*, prediction_pk: int) -> str:
    return WORK.run(JOB_KINDS["predictions"], prediction_pk)
