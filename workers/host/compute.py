"""A study's compute settings made real in a worker child (placement, dtype policy, compile options, input
pipeline) on the backend this process runs; experiments/tuning/compute_options.py is the web's side."""

import contextlib
import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import keras

from experiments.tuning.compute_options import BACKEND_NAMES, ComputeSettings
from workers.host.packing import memory_fraction
from workers.trial_stops import TrialFailed

JIT_COMPILE = {"on": True, "off": False}  # "auto" keeps what Keras resolved at compile time


def keras_backend() -> str:
    """The Keras backend of this process, as Keras loaded it (workers/host/backends/selection.py
    reads the same choice from the environment, for the main process, which never loads Keras)."""
    return keras.backend.backend()


def defaults() -> ComputeSettings:
    """A run without a study's settings (an ensemble's predictions): one device, float32, on
    the backend this process runs."""
    return ComputeSettings(backend=keras_backend())


def _runtime():
    """The backend's module, imported on first use (a JAX worker never imports TensorFlow)."""
    runtime = "jax_runtime" if keras_backend() == "jax" else "tf_runtime"
    return importlib.import_module(f"workers.host.backends.{runtime}")


@dataclass
class Placement:
    """Where one trial's model lives: what to build it under (a tf.distribute strategy's scope
    or a keras.distribution's) and the devices it spans."""

    scope: Callable[[], contextlib.AbstractContextManager]
    device_kind: str  # "cpu" | "gpu" | "tpu"
    device_names: list[str]
    replicas: int
    backend: str = "tensorflow"

    @property
    def drop_remainder(self) -> bool:
        """Training batches are all whole: TPUs compile for one batch shape (a last, smaller batch
        would mean a second program), and JAX's DataParallel splits each batch evenly."""
        return self.device_kind == "tpu" or self.row_multiple > 1

    @property
    def row_multiple(self) -> int:
        """Every batch's rows must be a multiple of this (JAX's DataParallel: its device count)."""
        return self.replicas if self.backend == "jax" else 1

    def global_batch_size(self, batch_size: int) -> int:
        """The study's batch size is per replica: a step consumes one batch per replica."""
        return batch_size * self.replicas

    def record(self, settings: ComputeSettings | None, batch_size: int | None = None) -> dict:
        """What to store on each trial and model (JSON-safe)."""
        settings = settings or defaults()
        record = {
            "backend": self.backend,
            "device_kind": self.device_kind,
            "device_names": list(self.device_names),
            "replicas": self.replicas,
            "precision": settings.precision,
            "jit_compile": settings.jit_compile,
            "steps_per_execution": settings.steps_per_execution,
            self.backend: _runtime().version(),
            "keras": keras.__version__,
        }
        share = memory_fraction() if self.backend == "jax" else None
        if share is not None:  # its GPU's memory is shared (packed trials, workers/host/packing.py)
            record["memory_fraction"] = share
        if batch_size is not None:
            record["batch_size_per_replica"] = int(batch_size)
            record["global_batch_size"] = self.global_batch_size(int(batch_size))
        return record


def placement_for(settings: ComputeSettings | None) -> Placement:
    """The devices for a trial with these settings, made once per child and kept: a TPU system initialises only once,
    and strategies are not free to make."""
    settings = settings or defaults()
    if settings.backend != keras_backend():
        running = keras_backend()
        raise TrialFailed(f"This study trains with {BACKEND_NAMES.get(settings.backend, settings.backend)}, but "
                          f"this worker runs {BACKEND_NAMES.get(running, running)} (KERAS_BACKEND): its jobs "
                          f"belong on the {settings.backend} workers' queues.")
    return _placement(keras_backend(), settings.queue, settings.devices_per_trial)


@functools.cache
def _placement(keras_backend: str, queue: str, devices: int) -> Placement:
    kind = queue if queue in ("gpu", "tpu") else "cpu"
    scope, kind, names, replicas = _runtime().placement(kind, devices)
    return Placement(scope, kind, names, replicas, keras_backend)


def for_inference(model):
    """The trained model as it evaluates and predicts every row (one device on JAX)."""
    return _runtime().for_inference(model)


def model_replicas(model) -> int:
    """How many replicas a built model's steps run on (a global batch is this × per-replica)."""
    return _runtime().model_replicas(model)


@contextlib.contextmanager
def precision(settings: ComputeSettings | None):
    """The dtype policy set while the model is built (layers and loss scaling read it then), and restored to float32
    whatever happens."""
    keras.config.set_dtype_policy((settings or defaults()).precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy("float32")


def apply_compile_options(model: keras.Model, settings: ComputeSettings | None) -> None:
    """The study's XLA and steps-per-execution choices on a model its hypermodel already
    compiled. Keras reads both when it makes its train/test/predict functions, which it does
    lazily on first use: setting the attributes and dropping any made function is enough."""
    settings = settings or defaults()
    if settings.jit_compile in JIT_COMPILE:
        # The setter falls back to False (with a warning) for models that cannot use XLA.
        model.jit_compile = JIT_COMPILE[settings.jit_compile]
    model.steps_per_execution = settings.steps_per_execution
    model.train_function = model.test_function = model.predict_function = None


def batches(x, y=None, *, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool, multiple: int = 1,
            on_device: bool = False):
    """The rows as batches on this backend: a tf.data pipeline on TensorFlow (strategies shard
    it; text goes through it), a PyDataset on JAX (`on_device`: kept there, see input_on_device). Both draw a
    new order each epoch from `seed`."""
    kwargs = {"on_device": True} if on_device else {}
    return _runtime().batches(x, y, batch_size=batch_size, shuffle=shuffle, seed=seed, drop_remainder=drop_remainder,
                              multiple=multiple, **kwargs)


def input_on_device(placement: Placement, arrays, *, percent: int, free_memory=None) -> bool:
    """Whether a run keeps its rows on its device for the whole run: JAX on one device, numeric rows, together
    within `percent` of the device's free memory (the rest is the model's, its activations' and any trial
    packed beside it). TensorFlow reads them through its tf.data pipeline on the host, prefetched."""
    if placement.backend != "jax" or placement.replicas != 1 or percent <= 0:
        return False
    if any(not hasattr(a, "dtype") or a.dtype.kind not in "biuf" for a in arrays):
        return False
    free = (free_memory or _runtime().free_memory)()
    needed = sum(a.size * 4 if a.dtype.itemsize > 4 and a.dtype.kind == "f" else a.nbytes for a in arrays)
    return free is not None and needed <= free * percent / 100
