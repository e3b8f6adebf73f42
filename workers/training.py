"""Train one trial: fit the hypermodel with the study's callbacks and report each epoch.

Knows nothing of the ORM: the caller passes a reporter (epoch metrics out, "keep going?"
back) and gets a TrialResult or an exception with a readable reason.
"""

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import keras
import numpy as np


class TrialFailed(Exception):
    """The trial cannot produce a result; str(exc) is shown to the user."""


class TrialCancelled(Exception):
    pass


class EpochReporter(Protocol):
    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool: ...


@dataclass
class DatasetArrays:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @classmethod
    def from_npz(cls, path: Path) -> "DatasetArrays":
        with np.load(path, allow_pickle=False) as npz:
            return cls(**{k: npz[k] for k in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test")})


@dataclass
class TrialSpec:
    objective: str
    direction: str  # "min" | "max"
    epochs: int
    batch_size: int
    patience: int
    executions: int
    seed: int
    initial_epoch: int = 0


@dataclass
class TrialResult:
    score: float
    best_step: int  # 0-based absolute epoch index of the best epoch
    metrics: dict  # the logs of the best epoch of the best execution
    checkpoint_path: Path
    duration_seconds: float


def _better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


def _clean(logs: dict) -> dict:
    return {k: float(v) for k, v in (logs or {}).items() if np.isscalar(v) or getattr(v, "shape", None) == ()}


class _Report(keras.callbacks.Callback):
    def __init__(self, reporter: EpochReporter, execution: int):
        super().__init__()
        self.reporter = reporter
        self.execution = execution
        self.cancelled = False
        self.history: list[tuple[int, dict]] = []

    def on_epoch_end(self, epoch, logs=None):
        logs = _clean(logs)
        self.history.append((epoch, logs))
        if not self.reporter.epoch_end(self.execution, epoch, logs):
            self.cancelled = True
            self.model.stop_training = True


def _keras_fit(model, **kwargs):
    return model.fit(**kwargs)


def run_trial(*, build, spec: TrialSpec, data: DatasetArrays, reporter: EpochReporter,
              workdir: Path, warm_start: Path | None = None, fit=_keras_fit) -> TrialResult:
    """`build()` returns a fresh compiled model; `fit(model, **kwargs)` trains it (a
    KerasTuner HyperModel may bring its own); `warm_start` is a checkpoint whose weights
    continue training (Hyperband's later rounds)."""
    started = time.monotonic()
    best: tuple[float, int, dict, Path] | None = None
    scores = []
    for execution in range(spec.executions):
        keras.utils.set_random_seed(spec.seed + execution)
        try:
            model = build()
        except Exception as exc:
            raise TrialFailed(f"Building the model failed: {type(exc).__name__}: {exc}") from exc
        if warm_start is not None:
            model.load_weights(warm_start)
        checkpoint = Path(workdir) / f"execution-{execution}.keras"
        report = _Report(reporter, execution)
        mode = "min" if spec.direction == "min" else "max"
        # restore_best_weights keeps the best epoch's weights in memory and puts them back
        # when training ends: one checkpoint write per execution instead of one per improvement.
        callbacks = [
            report,
            keras.callbacks.TerminateOnNaN(),
            keras.callbacks.EarlyStopping(monitor=spec.objective, mode=mode, patience=spec.patience,
                                          restore_best_weights=True),
        ]
        try:
            fit(
                model, x=data.x_train, y=data.y_train, validation_data=(data.x_val, data.y_val),
                epochs=spec.epochs, initial_epoch=spec.initial_epoch, batch_size=spec.batch_size,
                callbacks=callbacks, verbose=0,
            )
        except Exception as exc:
            raise TrialFailed(f"Training failed: {type(exc).__name__}: {exc}") from exc
        if report.cancelled:
            raise TrialCancelled()
        _check_history(report.history, spec.objective)
        values = [(logs[spec.objective], epoch, logs) for epoch, logs in report.history]
        if spec.direction == "min":
            value, epoch, logs = min(values, key=lambda v: v[0])
        else:
            value, epoch, logs = max(values, key=lambda v: v[0])
        scores.append(value)
        if best is None or _better(value, best[0], spec.direction):
            model.save(checkpoint)
            best = (value, epoch, logs, checkpoint)
    assert best is not None
    return TrialResult(
        score=float(np.mean(scores)), best_step=best[1], metrics=best[2],
        checkpoint_path=best[3], duration_seconds=time.monotonic() - started,
    )


def _check_history(history: list[tuple[int, dict]], objective: str) -> None:
    if not history:
        raise TrialFailed("Training ran no epoch.")
    for epoch, logs in history:
        loss = logs.get("loss")
        if loss is not None and not math.isfinite(loss):
            raise TrialFailed(f"The loss became {loss} at epoch {epoch + 1}; try a lower learning rate.")
    reported = history[-1][1]
    if objective not in reported:
        raise TrialFailed(
            f"The model does not report the objective {objective!r}; it reports: {', '.join(sorted(reported))}."
        )
    if any(not math.isfinite(logs.get(objective, 0.0)) for _, logs in history):
        raise TrialFailed(f"The objective {objective!r} became NaN or infinite.")
