"""JAX's side of a trial's placement: the host's local devices through keras.distribution.DataParallel and batches
as a PyDataset, with no TensorFlow anywhere."""

import contextlib
import math
import tempfile
from pathlib import Path

import jax
import keras
import numpy as np

from workers.trial_stops import TrialFailed


def version() -> str:
    return jax.__version__


def _devices(kind: str) -> list:
    try:
        return list(jax.devices(kind))
    except RuntimeError:  # no backend of that platform in this process
        return []


def _name(device) -> str:
    return f"{device.platform}:{device.id}"


def placement(kind: str, devices: int) -> tuple:
    """(scope, device kind, device names, replicas): several devices through DataParallel."""
    found = _devices(kind)
    if not found:
        raise TrialFailed(f"This study runs on the {kind.upper()} queue with JAX, but this worker child sees no "
                          f"{kind.upper()} (jax.devices: {', '.join(_name(d) for d in jax.devices())}): route the "
                          f"{kind}-jax queue only to {kind.upper()} hosts with a JAX build for them (jax[cuda12], "
                          "jax[tpu]).")
    if len(found) < devices:
        hint = (f"start the CPU workers with TUNEBOARD_CPU_DEVICES={devices} (XLA then splits the CPU into that many "
                "devices)" if kind == "cpu" else f"give each worker child {devices} devices "
                f"(TUNEBOARD_GPUS_PER_CHILD={devices})")
        raise TrialFailed(f"This trial needs {devices} {kind.upper()} devices (the study's devices per trial), but "
                          f"this worker child sees {len(found)}: {hint}, or lower the study's devices per trial.")
    chosen = [_name(d) for d in found[:devices]]
    if devices == 1:
        return contextlib.nullcontext, kind, chosen, 1
    return keras.distribution.DataParallel(devices=chosen).scope, kind, chosen, devices


def _model_devices(model) -> set:
    return model.weights[0].value.sharding.device_set if model.weights else set()


def model_replicas(model) -> int:
    return max(1, len(_model_devices(model)))


def for_inference(model):
    """The model on one device for evaluating and predicting every row, since DataParallel would drop a last batch's
    uneven rows from test metrics."""
    if len(_model_devices(model)) <= 1:
        return model
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.keras"
        model.save(path)
        return keras.saving.load_model(path, safe_mode=False)  # our own model, just written


def batches(x, y=None, *, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool,
            multiple: int = 1, on_device: bool = False) -> "SplitBatches":
    kind = DeviceBatches if on_device else SplitBatches
    return kind(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_remainder,
                multiple=multiple)


def free_memory() -> int | None:
    """Bytes free on the accelerator a one-device trial trains on: its allocator's limit less what is in use, and
    no more than the whole GPU has free (NVML: children packed beside it use it too). None on the CPU, where the
    rows are in host memory already (memory-mapped: a copy would only double them), or when the device will
    not say."""
    device = jax.local_devices()[0]
    if device.platform == "cpu":
        return None
    try:
        stats = device.memory_stats()
    except Exception:  # a platform without memory statistics
        stats = None
    if not stats or "bytes_limit" not in stats:
        return None
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    if device.platform == "gpu":
        from workers.host.packing import gpu_free_bytes

        whole = gpu_free_bytes()
        free = min(free, whole) if whole is not None else free
    return free


class SplitBatches(keras.utils.PyDataset):
    """Batches of a split's memory-mapped rows, reordered each epoch from the trial's seed and gathered ahead by a
    thread; cut to a multiple of the devices."""

    def __init__(self, x, y=None, *, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool,
                 multiple: int = 1, workers: int = 1):
        # One prefetch thread: with more, Keras 3.15's loader serves batches it prefetched before
        # the epoch's first step after on_epoch_end reshuffled, so an epoch mixed two orders (rows
        # twice, others not at all). One thread still prefetches ahead of the step.
        super().__init__(workers=workers, use_multiprocessing=False, max_queue_size=8)
        self.x, self.y = x, y
        self.batch_size, self.shuffle, self.drop_remainder = batch_size, shuffle, drop_remainder
        rows = len(x)
        if not drop_remainder:
            rows -= (rows % batch_size) % multiple  # the last batch cut to a multiple of the devices
        self.rows = rows
        self.rng = np.random.default_rng(seed)
        self.order = self.rng.permutation(len(x)) if shuffle else None

    def __len__(self) -> int:
        whole = self.rows // self.batch_size
        return whole if self.drop_remainder else math.ceil(self.rows / self.batch_size)

    def __getitem__(self, index: int):
        start = index * self.batch_size
        stop = min(start + self.batch_size, self.rows)
        if self.order is None:
            rows = slice(start, stop)
        else:
            rows = np.sort(self.order[start:stop])  # sorted: fewer page reads of a memory map
        x = _float32(np.asarray(self.x[rows]))
        return x if self.y is None else (x, _float32(np.asarray(self.y[rows])))

    def on_epoch_end(self) -> None:
        if self.shuffle:
            self.order = self.rng.permutation(len(self.x))


class DeviceBatches(SplitBatches):
    """The same batches as SplitBatches, in the same order for the same seed, from a split kept on the device for the
    whole run: each step gathers its rows there, so only the batch's row numbers cross from the host."""

    def __init__(self, x, y=None, **kwargs):
        super().__init__(x, y, **kwargs)
        self.x = jax.device_put(_float32(np.asarray(x)))
        self.y = None if y is None else jax.device_put(_float32(np.asarray(y)))

    def __getitem__(self, index: int):
        start = index * self.batch_size
        stop = min(start + self.batch_size, self.rows)
        if self.order is None:
            x = self.x[start:stop]
            return x if self.y is None else (x, self.y[start:stop])
        rows = jax.device_put(np.sort(self.order[start:stop]))  # sorted, as the host's batches are
        x = jax.numpy.take(self.x, rows, axis=0)
        return x if self.y is None else (x, jax.numpy.take(self.y, rows, axis=0))


def _float32(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float32) if values.dtype == np.float64 else values
