"""Fit one trial (and a retrain's two runs) with the study's callbacks, reporting each epoch through a reporter
the caller passes, so it knows nothing of the ORM."""

import contextlib
import logging
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import keras
import numpy as np
from django.conf import settings

from experiments.tuning.compute_options import ComputeSettings
from workers.host.compute import (
    Placement,
    apply_compile_options,
    batches,
    defaults,
    input_on_device,
    placement_for,
    precision,
)
from workers.training import checkpoints
from workers.training.callbacks import EpochCallbacks, EpochReport, KeepBest, StopOnNaN, TimeLimit, better
from workers.training.model_costs import model_costs, time_costs
from workers.trial_stops import TrialCancelled, TrialFailed, TrialPreempted

log = logging.getLogger(__name__)


class EpochReporter(Protocol):
    """Truthy: go on. Falsy: stop; a falsy answer with a `pruned` record (the study's pruner
    stopped the trial) makes a result, any other stop cancels the trial."""

    def epoch_end(self, execution: int, epoch: int, logs: dict) -> bool: ...


@dataclass
class DatasetArrays:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


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
    time_limit_seconds: float | None = None  # TUNEBOARD_MAX_TRIAL_SECONDS
    measure_latency: bool = False  # the study optimises or bounds latency_ms (workers/training/model_costs.py)


@dataclass
class Resume:
    """Where a preempted run goes on: its next epoch, the epochs it reported, early stopping's best
    value and wait, its last and best weights and its optimizer's variables (files)."""

    epoch: int
    history: list
    best: float | None
    wait: int
    last_weights: Path
    best_weights: Path | None = None
    optimizer: Path | None = None  # step count, learning rate and moments: without them Adam restarts cold
    spent_seconds: float = 0.0  # of the trial's time limit, over the attempts so far


def _preempted(report: EpochReport, keep_best: KeepBest, model, workdir: Path, spent: float) -> TrialPreempted:
    last = checkpoints.save_weights(model.get_weights(), Path(workdir) / f"resume-last{checkpoints.SUFFIX}")
    best_weights = keep_best.best_weights()
    best = None if best_weights is None else checkpoints.save_weights(
        best_weights, Path(workdir) / f"resume-best{checkpoints.SUFFIX}")
    optimizer = getattr(model, "optimizer", None)
    state = None if optimizer is None or not optimizer.variables else checkpoints.save_weights(
        [keras.ops.convert_to_numpy(variable) for variable in optimizer.variables],
        Path(workdir) / f"resume-optimizer{checkpoints.SUFFIX}")
    return TrialPreempted(Resume(epoch=report.history[-1][0] + 1, history=[list(h) for h in report.history],
                                 best=keep_best.best, wait=keep_best.wait, last_weights=last, best_weights=best,
                                 optimizer=state, spent_seconds=spent))


def _restore_optimizer(model, path: Path) -> None:
    """The preempted attempt's optimizer variables into the rebuilt model's optimizer (built now, as
    fit would). A model whose optimizer differs (shapes or count) starts it afresh, as before."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:  # a hypermodel whose own fit compiles: nothing to put it into
        return
    try:
        values = checkpoints.load_weights(path)
        optimizer.build(model.trainable_variables)
        variables = optimizer.variables
        if [tuple(v.shape) for v in variables] != [tuple(v.shape) for v in values]:
            raise ValueError(f"{len(values)} variables saved, {len(variables)} in this optimizer")
        for variable, value in zip(variables, values, strict=True):
            variable.assign(value)
    except Exception as exc:  # the weights are what matter: going on with a fresh optimizer beats failing
        log.warning("the preempted attempt's optimizer state could not be restored (%s): it starts afresh", exc)


@dataclass
class TrialResult:
    score: float
    best_step: int  # 0-based absolute epoch index of the best epoch
    metrics: dict  # the logs of the best epoch of the best execution
    checkpoint_path: Path
    duration_seconds: float
    compute: dict = field(default_factory=dict)  # where and how it trained: Placement.record()
    epochs_trained: int = 0  # over all executions
    pruned: dict | None = None  # the pruner's decision, when it stopped the trial


def _float32(values: np.ndarray) -> np.ndarray:
    # As our pipeline does: models compute in float32, and Keras would convert per batch.
    return values.astype(np.float32) if values.dtype == np.float64 else values


class _Compute:
    """One training run's placement, batch and input pipelines, from the study's settings."""

    def __init__(self, compute: ComputeSettings | None, batch_size: int):
        self.settings = compute or defaults()
        self.placement: Placement = placement_for(self.settings)
        self.batch_size = batch_size
        self.global_batch = self.placement.global_batch_size(batch_size)
        self.on_device = False

    def choose_input(self, *arrays) -> None:
        """Keep the run's rows on its device when they fit there (compute.input_on_device); call before the
        pipelines are made."""
        self.on_device = input_on_device(self.placement, arrays, percent=settings.DEVICE_INPUT_PERCENT)

    def record(self) -> dict:
        return {**self.placement.record(self.settings, batch_size=self.batch_size),
                "input": "device" if self.on_device else "host"}

    def _arrays(self, *arrays) -> bool:
        """The training inputs as the backend takes them cheapest: Keras's own array path where it suffices, else our
        tf.data pipeline or PyDataset."""
        return self.placement.backend == "tensorflow" and self.placement.replicas == 1 and (
            not self.placement.drop_remainder) and all(isinstance(a, np.ndarray) and a.dtype.kind in "biuf"
                                                       for a in arrays)

    def training(self, x, y, seed: int) -> dict:
        """fit's keyword arguments for the training rows."""
        if self._arrays(x, y):
            return {"x": _float32(x), "y": _float32(y), "batch_size": self.global_batch, "shuffle": True}
        drop = self.placement.drop_remainder
        if drop and len(x) < self.global_batch:
            raise TrialFailed(f"The training rows ({len(x):,}) do not fill one batch of {self.global_batch:,} "
                              f"({self.batch_size} per replica × {self.placement.replicas} replicas), and this "
                              f"run ({self.placement.device_kind.upper()}, {self.placement.backend}) trains on whole "
                              "batches only: lower the batch size.")
        # shuffle=False: our batches draw their own order each epoch (Keras would shuffle a
        # PyDataset's batch order again, and warns that it cannot shuffle a tf.data dataset).
        return {"x": self._pipeline(x, y, shuffle=True, seed=seed, drop_remainder=drop), "shuffle": False}

    def validation(self, x, y):
        """fit's `validation_data`. Never drop validation rows, even on a TPU: a last smaller
        batch costs one more compilation, a dropped one would change the objective. (JAX's
        DataParallel is the exception: it cannot split fewer rows than devices; see SplitBatches.)"""
        if self._arrays(x, y):
            return _float32(x), _float32(y)
        return self._pipeline(x, y, shuffle=False, seed=0, drop_remainder=False, multiple=self.placement.row_multiple)

    def _pipeline(self, x, y, **kwargs):
        try:
            return batches(x, y, batch_size=self.global_batch, on_device=self.on_device, **kwargs)
        except Exception as exc:
            raise TrialFailed(f"Preparing the data for training failed: {type(exc).__name__}: {exc}") from exc

    def build(self, build, warm_start: Path | None = None):
        """A fresh model built under the placement's strategy and the study's precision, with
        the study's compile options; call inside `self.scope()`."""
        model = _build(build)
        apply_compile_options(model, self.settings)
        if warm_start is not None:
            try:
                checkpoints.restore(model, warm_start)
            except checkpoints.CheckpointMismatch as exc:
                raise TrialFailed(str(exc)) from exc
        return model

    @contextlib.contextmanager
    def scope(self):
        """Variables are placed (mirrored, on TPU) when they are created, layers take the dtype
        policy when they are created: both must hold from build to the end of fit."""
        with precision(self.settings), self.placement.scope():
            yield


def describe(compute: ComputeSettings | None, batch_size: int | None = None) -> dict:
    """The record (Placement.record) of where and how a run with these settings trains in this
    worker child: what run_trial stores in TrialResult.compute, for retrains to store too."""
    settings = compute or defaults()
    return placement_for(settings).record(settings, batch_size=batch_size)


def run_trial(*, build, spec: TrialSpec, data: DatasetArrays, reporter: EpochReporter,
              workdir: Path, warm_start: Path | None = None, fit=None,
              compute: ComputeSettings | None = None, resume: Resume | None = None) -> TrialResult:
    """Train one trial (its executions) with the study's callbacks, reporting each epoch; `build`, `fit`, `warm_start`
    and `compute` come from the caller; `resume` goes on from where a preempted attempt stopped (one execution)."""
    started = time.monotonic()
    run = _Compute(compute, spec.batch_size)
    run.choose_input(data.x_train, data.y_train, data.x_val, data.y_val)
    validation = run.validation(data.x_val, data.y_val)
    best: tuple[float, int, dict, Path] | None = None
    scores = []
    epochs_trained, pruned = 0, None
    # One budget for all executions, and for all attempts of a preempted trial.
    time_limit = TimeLimit(spec.time_limit_seconds, 0.0 if resume is None else resume.spent_seconds)
    for execution in range(spec.executions):
        keras.utils.set_random_seed(spec.seed + execution)
        train = model = None  # the last execution's rows (on the device, perhaps) and model go before the next's
        train = run.training(data.x_train, data.y_train, seed=spec.seed + execution)
        checkpoint = Path(workdir) / f"execution-{execution}{checkpoints.SUFFIX}"
        report = EpochReport(lambda epoch, logs, execution=execution: reporter.epoch_end(execution, epoch, logs),
                             rows=len(data.x_train))
        keep_best = KeepBest(spec.objective, spec.direction, spec.patience)
        start_epoch, weights = spec.initial_epoch, warm_start
        if resume is not None:  # the preempted attempt's epochs count as this one's
            keras.utils.set_random_seed(spec.seed + execution + 7919 * resume.epoch)  # not epoch 0's draws again
            report.history = [(int(epoch), logs) for epoch, logs in resume.history]
            keep_best.best, keep_best.wait = resume.best, resume.wait
            keep_best.weights = None if resume.best_weights is None else checkpoints.load_weights(resume.best_weights)
            start_epoch, weights = resume.epoch, resume.last_weights
        callbacks = [report, StopOnNaN(), keep_best, time_limit]
        with run.scope():
            model = run.build(build, weights)
            if hasattr(reporter, "model_built"):  # optional: a pruner that watches the model's size
                reporter.model_built(model)
            if resume is not None and resume.optimizer is not None:
                _restore_optimizer(model, resume.optimizer)
            _fit(fit, model, **train, validation_data=validation, epochs=spec.epochs,
                 initial_epoch=start_epoch, callbacks=callbacks, verbose=0)
        time_limit.check()
        ran_to_its_end = bool(report.history) and (report.history[-1][0] + 1 >= spec.epochs
                                                   or keep_best.wait >= spec.patience)
        if report.cancelled and not (ran_to_its_end and execution == spec.executions - 1):
            # A stop that came with the last epoch changes nothing: the result is complete and kept.
            if report.preempted and spec.executions == 1 and report.history:
                spent = (0.0 if resume is None else resume.spent_seconds) + time.monotonic() - started
                raise _preempted(report, keep_best, model, workdir, spent)
            raise TrialCancelled()
        _check_history(report.history, spec.objective)
        values = [(logs[spec.objective], epoch, logs) for epoch, logs in report.history]
        if spec.direction == "min":
            value, epoch, logs = min(values, key=lambda v: v[0])
        else:
            value, epoch, logs = max(values, key=lambda v: v[0])
        scores.append(value)
        if best is None or better(value, best[0], spec.direction):
            # A custom fit may ignore the callbacks: then the final weights are what we have.
            checkpoints.save_weights(keep_best.best_weights() or model.get_weights(), checkpoint)
            best = (value, epoch, logs, checkpoint)
        epochs_trained += len(report.history)
        if report.pruned is not None:
            # Stopped by the pruner: its score is the best so far (the mean over the executions
            # it ran, the last one cut short) and the executions left are not run.
            pruned = report.pruned
            break
    assert best is not None
    costs = model_costs(model, data.x_val, latency=spec.measure_latency, replicas=run.placement.replicas)
    duration, compute = time.monotonic() - started, run.record()
    costs.update(time_costs(duration + (0.0 if resume is None else resume.spent_seconds),
                            devices=len(compute.get("device_names") or []) or 1, epochs=epochs_trained))
    return TrialResult(
        score=float(np.mean(scores)), best_step=best[1], metrics={**best[2], **costs},
        checkpoint_path=best[3], duration_seconds=duration, compute=compute,
        epochs_trained=epochs_trained, pruned=pruned,
    )


def detect_best_epoch(*, build, data: DatasetArrays, batch_size: int, epoch_cap: int, seed: int, report,
                      fit=None, patience: int = 10, time_limit_seconds: float | None = None,
                      compute: ComputeSettings | None = None) -> tuple[int, dict]:
    """The recipe's best epoch: a fresh model trained on the training split with validation,
    EarlyStopping on val_loss (patience 10) up to `epoch_cap` epochs; returns
    (argmin + 1, that epoch's logs)."""
    run = _Compute(compute, batch_size)
    run.choose_input(data.x_train, data.y_train, data.x_val, data.y_val)
    keras.utils.set_random_seed(seed)
    train = run.training(data.x_train, data.y_train, seed=seed)
    validation = run.validation(data.x_val, data.y_val)
    log = EpochReport(report, rows=len(data.x_train))
    time_limit = TimeLimit(time_limit_seconds)
    callbacks = [log, StopOnNaN(),
                 keras.callbacks.EarlyStopping(monitor="val_loss", mode="min", patience=patience), time_limit]
    with run.scope():
        model = run.build(build)
        _fit(fit, model, **train, validation_data=validation, epochs=epoch_cap, callbacks=callbacks, verbose=0)
    time_limit.check()
    if log.cancelled:
        raise TrialCancelled()
    _check_history(log.history, "val_loss")
    index = int(np.argmin([logs["val_loss"] for _, logs in log.history]))
    epoch, logs = log.history[index]
    return epoch + 1, logs


def train_on_train_and_validation(*, build, data: DatasetArrays, batch_size: int, epochs: int, seed: int, report,
                                  fit=None, time_limit_seconds: float | None = None,
                                  compute: ComputeSettings | None = None):
    """A fresh model trained on train+validation for a fixed number of epochs (no
    validation data is left to stop on). `build` should adapt preprocessing on the same rows.
    Where it trained: describe(compute, batch_size)."""
    run = _Compute(compute, batch_size)
    x, y = np.concatenate([data.x_train, data.x_val]), np.concatenate([data.y_train, data.y_val])
    run.choose_input(x, y)
    keras.utils.set_random_seed(seed)
    train = run.training(x, y, seed=seed)
    log = EpochReport(report, rows=len(data.x_train) + len(data.x_val))
    time_limit = TimeLimit(time_limit_seconds)
    with run.scope():
        model = run.build(build)
        _fit(fit, model, **train, epochs=epochs, callbacks=[log, StopOnNaN(), time_limit],
             verbose=0)
    time_limit.check()
    if log.cancelled:
        raise TrialCancelled()
    _check_history(log.history, "loss")
    return model


def _build(build):
    try:
        return build()
    except Exception as exc:
        raise TrialFailed(f"Building the model failed: {type(exc).__name__}: {exc}") from exc


def _fit(fit, model, *, callbacks: list, **kwargs) -> None:
    """`fit` None is Keras's own, given the list that never reads a step's logs (callbacks.EpochCallbacks); a
    HyperModel's own fit gets the plain list, as KerasTuner hands it."""
    try:
        with warnings.catch_warnings():
            # Keras warns that fit's default shuffle=True does nothing for a tf.data dataset:
            # ours shuffle themselves, each epoch.
            warnings.filterwarnings("ignore", message="`shuffle=True` was passed", category=UserWarning)
            if fit is None:
                model.fit(callbacks=EpochCallbacks(callbacks, model=model, epochs=kwargs["epochs"]), **kwargs)
            else:
                fit(model, callbacks=callbacks, **kwargs)
    except Exception as exc:
        raise TrialFailed(f"Training failed: {type(exc).__name__}: {exc}") from exc
    finally:
        for callback in callbacks:
            if isinstance(callback, TimeLimit):
                callback.cancel()


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
