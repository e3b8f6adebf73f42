"""The callbacks a training run fits with: early stopping that keeps the best epoch's weights,
each epoch's logs reported (a falsy answer stops it: pruned or cancelled), and the time limit."""

import logging
import time

import keras
import numpy as np

from workers.host.system_metrics import report_throughput
from workers.trial_stops import TrialFailed

log = logging.getLogger(__name__)


def better(a: float, b: float, direction: str) -> bool:
    return a < b if direction == "min" else a > b


def clean_logs(logs: dict) -> dict:
    return {k: float(v) for k, v in (logs or {}).items() if np.isscalar(v) or getattr(v, "shape", None) == ()}


class KeepBest(keras.callbacks.Callback):
    """Early stopping that keeps the best epoch's weights for the checkpoint without restoring them, copying only when
    a later epoch begins."""

    def __init__(self, objective: str, direction: str, patience: int):
        super().__init__()
        self.objective, self.direction, self.patience = objective, direction, patience
        self.best: float | None = None
        self.weights: list | None = None
        self.pending = False  # the model's current weights are the best, not yet copied
        self.began = False
        self.wait = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.began = True
        if self.pending:
            self.weights, self.pending = self.model.get_weights(), False

    def on_epoch_end(self, epoch, logs=None):
        began, self.began = self.began, False
        value = (logs or {}).get(self.objective)
        if value is None:
            return
        value = float(value)
        if self.best is None or better(value, self.best, self.direction):
            self.best, self.wait = value, 0
            if began:
                self.weights, self.pending = None, True
            else:
                self.weights, self.pending = self.model.get_weights(), False
            return
        self.wait += 1
        if self.wait >= self.patience:
            self.model.stop_training = True

    def best_weights(self) -> list | None:
        """The best epoch's weights; None when no epoch reported the objective."""
        return self.model.get_weights() if self.pending else self.weights


class EpochReport(keras.callbacks.Callback):
    """Keeps each epoch's logs and hands them to `report(epoch, logs)`; a falsy answer stops
    training: pruned when it carries the pruner's decision, else cancelled (the study was
    cancelled or the row is gone)."""

    def __init__(self, report, rows: int | None = None):
        super().__init__()
        self.report = report
        self.rows = rows  # training rows an epoch: its samples per second go to the system samples
        self.cancelled = False
        self.pruned: dict | None = None
        self.history: list[tuple[int, dict]] = []
        self.epoch_started = time.monotonic()

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_started = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        logs = clean_logs(logs)
        self.history.append((epoch, logs))
        speed = ""
        if self.rows:  # the epoch's wall time, its validation included: what the trial got of its device
            per_second = self.rows / max(time.monotonic() - self.epoch_started, 1e-9)
            report_throughput(per_second)
            speed = f" ({per_second:,.0f} samples/s)"
        # The job's log gets one line an epoch (Keras's own progress is one per step, or none).
        log.info("epoch %d: %s%s", epoch + 1, ", ".join(f"{name} {value:.4g}" for name, value in logs.items()), speed)
        verdict = self.report(epoch, logs)
        if not verdict:
            self.pruned = getattr(verdict, "pruned", None)
            self.cancelled = self.pruned is None
            self.model.stop_training = True


class TimeLimit(keras.callbacks.Callback):
    """Stops training after the batch during which the time limit passed, since an epoch may be long."""

    def __init__(self, limit_seconds: float | None):
        super().__init__()
        self.limit = limit_seconds
        self.deadline = None if limit_seconds is None else time.monotonic() + limit_seconds
        self.exceeded = False

    def on_train_batch_end(self, batch, logs=None):
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.exceeded = True
            self.model.stop_training = True

    def check(self) -> None:
        if self.exceeded:
            raise TrialFailed(f"It ran longer than the limit of {self.limit:.0f} s (TUNEBOARD_MAX_TRIAL_SECONDS) "
                              "and was stopped; use fewer epochs or a smaller model, or raise the limit.")
