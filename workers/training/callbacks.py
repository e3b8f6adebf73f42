"""The callbacks a training run fits with: early stopping that keeps the best epoch's weights,
each epoch's logs reported (a falsy answer stops it: pruned or cancelled), the NaN stop and the
time limit; and the callback list that never reads a step's logs (no device sync per step)."""

import logging
import math
import threading
import time

import keras
import numpy as np
from keras.src.utils import is_default

from workers.host.packing import record_epoch
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
        self.preempted = False  # cancelled so that another study gets the slot: it resumes from here
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
            if len(self.history) > 1:  # a run's first epoch compiles: auto packing judges the steady ones
                record_epoch(per_second)
            speed = f" ({per_second:,.0f} samples/s)"
        # The job's log gets one line an epoch (Keras's own progress is one per step, or none).
        log.info("epoch %d: %s%s", epoch + 1, ", ".join(f"{name} {value:.4g}" for name, value in logs.items()), speed)
        verdict = self.report(epoch, logs)
        if not verdict:
            self.pruned = getattr(verdict, "pruned", None)
            self.cancelled = self.pruned is None
            self.preempted = bool(getattr(verdict, "preempted", False))
            self.model.stop_training = True


class StopOnNaN(keras.callbacks.Callback):
    """Keras's TerminateOnNaN at the epoch's end: its batch hook reads every step's loss on the host, one device
    sync a step. An epoch's loss is the mean of its steps', so a NaN step shows in it; the history check then
    fails the trial with the reason."""

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            self.model.stop_training = True


class TimeLimit(keras.callbacks.Callback):
    """Stops training at the step after the limit passed, since an epoch may be long: a timer thread raises the
    model's stop flag, which fit reads between steps, instead of a batch hook that would sync every step. The run
    failed the limit only if fit then ended before its last epoch (a limit passing in the last epoch's validation
    keeps a complete result). One instance is one budget across the fits it is given to; `cancel()` after each
    (fit may end by an error)."""

    def __init__(self, limit_seconds: float | None, spent_seconds: float = 0.0):
        """`spent_seconds`: what earlier attempts of the run already used (a preempted trial's)."""
        super().__init__()
        self.limit = limit_seconds
        self.deadline = None if limit_seconds is None else time.monotonic() + limit_seconds - spent_seconds
        self.exceeded = False
        self.lock = threading.Lock()
        self.training = False  # a timer that fires after its fit ended must not fail the result
        self.fired = False
        self.last_epoch: int | None = None
        self.timer: threading.Timer | None = None

    def on_train_begin(self, logs=None):
        if self.deadline is None:
            return
        with self.lock:
            self.training, self.fired, self.last_epoch = True, False, None
        self.timer = threading.Timer(max(self.deadline - time.monotonic(), 0.0), self._expire)
        self.timer.daemon = True
        self.timer.start()

    def _expire(self) -> None:
        with self.lock:
            if self.training:
                self.fired = True
                # The raw model, not `self.model`: on JAX that property first copies the training state back
                # into the model, which from this thread races the step that donates it ("Buffer has been
                # deleted or donated").
                self._model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.last_epoch = epoch

    def on_train_end(self, logs=None):
        with self.lock:
            epochs = (self.params or {}).get("epochs")
            if self.fired and (self.last_epoch is None or epochs is None or self.last_epoch + 1 < epochs):
                self.exceeded = True
        self.cancel()

    def cancel(self) -> None:
        with self.lock:
            self.training = False
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def check(self) -> None:
        if self.exceeded:
            raise TrialFailed(f"It ran longer than the limit of {self.limit:.0f} s (TUNEBOARD_MAX_TRIAL_SECONDS) "
                              "and was stopped; use fewer epochs or a smaller model, or raise the limit.")


_STEP_HOOKS = ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end",
               "on_test_batch_begin", "on_test_batch_end", "on_predict_batch_begin", "on_predict_batch_end")


def _nothing(*args, **kwargs) -> None:
    return None


class EpochCallbacks(keras.callbacks.CallbackList):
    """What model.fit is given: Keras's list, but a step hook none of the callbacks overrides is not called at all.
    Keras's own list reads each step's logs on the host (TensorFlow: on the training thread, a device sync a
    step), or on JAX hands them to a thread, which races the state the next step donates ("Array has been
    deleted"). With none of ours on a step, a step's logs are never read; an epoch's are, as before."""

    def __init__(self, callbacks: list, *, model, epochs: int):
        super().__init__(list(callbacks), add_history=True, add_progbar=False, model=model, verbose=0, epochs=epochs)
        for hook in _STEP_HOOKS:
            if all(is_default(getattr(callback, hook)) for callback in self.callbacks):
                setattr(self, hook, _nothing)
