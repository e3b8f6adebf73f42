"""A study's compute settings made real in a worker child: where a trial's replicas run (a
tf.distribute strategy), the dtype policy its layers are built with, the compile options
Keras trains with, and the tf.data pipeline that feeds it.

experiments/tuning/compute_options.py holds the same settings as the web sees them (no TensorFlow).
"""

import contextlib
import functools
import os
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from experiments.tuning.compute_options import ComputeSettings
from workers.devices import discover_tpus
from workers.trial_stops import TrialFailed

DEFAULT = ComputeSettings()
JIT_COMPILE = {"on": True, "off": False}  # "auto" keeps what Keras resolved at compile time
TPU_ENVIRONMENT = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG")  # what TPUClusterResolver() reads


@dataclass
class Placement:
    """Where one trial's model lives: the strategy to build it under and the devices it spans."""

    strategy: tf.distribute.Strategy
    device_kind: str  # "cpu" | "gpu" | "tpu"
    device_names: list[str]
    replicas: int

    @property
    def drop_remainder(self) -> bool:
        """TPUs compile for one batch shape: a last, smaller batch would mean a second program."""
        return self.device_kind == "tpu"

    def global_batch_size(self, batch_size: int) -> int:
        """The study's batch size is per replica; a step consumes one batch per replica."""
        return batch_size * self.replicas

    def record(self, settings: ComputeSettings | None, batch_size: int | None = None) -> dict:
        """What to store on each trial and model (JSON-safe)."""
        settings = settings or DEFAULT
        record = {
            "device_kind": self.device_kind,
            "device_names": list(self.device_names),
            "replicas": self.replicas,
            "precision": settings.precision,
            "jit_compile": settings.jit_compile,
            "steps_per_execution": settings.steps_per_execution,
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
        }
        if batch_size is not None:
            record["batch_size_per_replica"] = int(batch_size)
            record["global_batch_size"] = self.global_batch_size(int(batch_size))
        return record


def placement_for(settings: ComputeSettings | None) -> Placement:
    """The strategy and devices for a trial with these settings, in this worker child.

    Strategies are made once per child and kept: a TPU system must be initialised only once,
    and a MirroredStrategy is cheap to keep but not free to make for every trial."""
    settings = settings or DEFAULT
    return _placement(settings.queue, settings.devices_per_trial)


@functools.cache
def _placement(queue: str, devices: int) -> Placement:
    if queue == "tpu":
        return _tpu_placement(devices)
    if queue == "gpu":
        return _local_placement("gpu", devices)
    return _local_placement("cpu", devices)


def _local_placement(kind: str, devices: int) -> Placement:
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if kind == "gpu" and not gpus:
        raise TrialFailed(f"This study runs on the GPU queue, but this worker child sees no GPU "
                          f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): "
                          "route the gpu queue only to GPU hosts.")
    if devices == 1:
        # The default strategy: TensorFlow places the model on the first visible GPU, else the CPU.
        names = gpus[:1] or [tf.config.list_logical_devices("CPU")[0].name]
        return Placement(tf.distribute.get_strategy(), "gpu" if gpus else "cpu", names, 1)
    if kind == "gpu":
        if len(gpus) < devices:
            raise TrialFailed(f"This trial needs {devices} GPUs (the study's devices per trial), but this worker "
                              f"child sees {len(gpus)}: start the GPU workers with "
                              f"TUNEBOARD_GPUS_PER_CHILD={devices} and concurrency (GPUs on the host) ÷ {devices}, "
                              "or lower the study's devices per trial.")
        names = gpus[:devices]
    else:
        cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
        if len(cpus) < devices:
            raise TrialFailed(f"This trial needs {devices} CPU devices (the study's devices per trial), but this "
                              f"worker child has {len(cpus)}: start the CPU workers with "
                              f"TUNEBOARD_CPU_DEVICES={devices} (each child splits its CPU into that many logical "
                              "devices), or set devices per trial to 1.")
        names = cpus[:devices]
    return Placement(tf.distribute.MirroredStrategy(devices=names), kind, names, devices)


def _tpu_placement(devices: int) -> Placement:
    named = any(os.environ.get(name) for name in TPU_ENVIRONMENT)
    if not named and not discover_tpus():
        raise TrialFailed("This study runs on the TPU queue, but this worker host has no TPU (no /dev/accel* or "
                          f"/dev/vfio device, and none of {', '.join(TPU_ENVIRONMENT)} is set): route the tpu queue "
                          "only to TPU hosts.")
    try:
        # A TPU node named in the environment, else the TPU VM's own chips ("local").
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=None if named else "local")
        tf.config.experimental_connect_to_cluster(resolver)
        topology = tf.tpu.experimental.initialize_tpu_system(resolver)
    except Exception as exc:
        raise TrialFailed(f"This study runs on the TPU queue, but this worker host could not reach its TPU "
                          f"({type(exc).__name__}: {exc}): route the tpu queue only to TPU hosts.") from exc
    cores = [d.name for d in tf.config.list_logical_devices("TPU")]
    if len(cores) < devices:
        raise TrialFailed(f"This trial needs {devices} TPU cores (the study's devices per trial), but this "
                          f"worker's TPU has {len(cores)}: lower the study's devices per trial.")
    assignment = None
    if devices < len(cores):
        assignment = tf.tpu.experimental.DeviceAssignment.build(topology, num_replicas=devices)
    strategy = tf.distribute.TPUStrategy(resolver, experimental_device_assignment=assignment)
    return Placement(strategy, "tpu", cores[:devices], strategy.num_replicas_in_sync)


def configure_logical_cpus(n: int) -> None:
    """Split this process's CPU into `n` logical devices so a CPU trial can run `n` replicas
    (MirroredStrategy). Only possible before TensorFlow initialises its runtime: the worker
    child does it at start (TUNEBOARD_CPU_DEVICES)."""
    if n <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * n)
    except RuntimeError as exc:
        raise RuntimeError(f"Cannot split the CPU into {n} logical devices after TensorFlow has started; "
                           "configure_logical_cpus must run first in the process.") from exc


@contextlib.contextmanager
def precision(settings: ComputeSettings | None):
    """Layers take the global dtype policy when they are created, and compile() wraps the
    optimizer for loss scaling when the model's policy is mixed_float16: so the policy must be
    set while the model is built. Restored to float32 whatever happens, so the next model in
    this process is not built in reduced precision by accident."""
    keras.config.set_dtype_policy((settings or DEFAULT).precision)
    try:
        yield
    finally:
        keras.config.set_dtype_policy("float32")


def apply_compile_options(model: keras.Model, settings: ComputeSettings | None) -> None:
    """The study's XLA and steps-per-execution choices on a model its hypermodel already
    compiled. Keras reads both when it makes its train/test/predict functions, which it does
    lazily on first use: setting the attributes and dropping any made function is enough."""
    settings = settings or DEFAULT
    if settings.jit_compile in JIT_COMPILE:
        # The setter falls back to False (with a warning) for models that cannot use XLA.
        model.jit_compile = JIT_COMPILE[settings.jit_compile]
    model.steps_per_execution = settings.steps_per_execution
    model.train_function = model.test_function = model.predict_function = None


def _tensor(values) -> tf.Tensor:
    if isinstance(values, tf.Tensor):
        return values
    values = np.asarray(values)
    if values.dtype.kind in "US" or values.dtype == object:
        return tf.constant(values.astype(str), dtype=tf.string)
    if values.dtype == np.float64:
        values = values.astype(np.float32)  # as Keras does with NumPy input: models compute in float32
    return tf.convert_to_tensor(values)


def pipeline(x, y=None, *, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool) -> tf.data.Dataset:
    """Batches of (x, y) (or x alone), in a new order each epoch when `shuffle`.

    The order is shuffled as row indices and each batch gathered in one op, as Keras does for
    NumPy input: shuffling the rows themselves would copy every row through the shuffle
    buffer. The order sequence is fixed by `seed` (and TensorFlow's global seed); each
    iteration of the dataset (Keras makes one per epoch) draws the next order."""
    features = _tensor(x)
    targets = None if y is None else _tensor(y)
    rows = int(features.shape[0])
    indices = tf.data.Dataset.range(rows)
    if shuffle:
        indices = indices.shuffle(max(rows, 1), seed=seed, reshuffle_each_iteration=True)
    indices = indices.batch(batch_size, drop_remainder=drop_remainder)
    tensors = features if targets is None else (features, targets)
    dataset = tf.data.Dataset.zip((indices, tf.data.Dataset.from_tensors(tensors).repeat()))
    dataset = dataset.map(lambda i, data: tf.nest.map_structure(lambda t: tf.gather(t, i), data),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    options = tf.data.Options()
    # Keras does the same for NumPy input: the default graph rewrites serialise the whole
    # pipeline, arrays included, for nothing on a pipeline this simple.
    options.experimental_optimization.apply_default_optimizations = False
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)
