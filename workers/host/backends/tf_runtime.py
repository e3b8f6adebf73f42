"""TensorFlow's side of a trial's placement: the tf.distribute strategy (default, Mirrored or
TPUStrategy) and the tf.data pipeline multi-replica and TPU runs (and text) are fed with."""

import os

import numpy as np
import tensorflow as tf

from workers.host.devices import discover_tpus
from workers.trial_stops import TrialFailed

TPU_ENVIRONMENT = ("TPU_NAME", "KUBE_GOOGLE_CLOUD_TPU_ENDPOINTS", "TPU_CONFIG")  # what TPUClusterResolver() reads


def version() -> str:
    return tf.__version__


def placement(kind: str, devices: int) -> tuple:
    """(scope, device kind, device names, replicas) for `devices` replicas of the given kind."""
    if kind == "tpu":
        strategy, names = tpu_placement(devices)
        return strategy.scope, "tpu", names, strategy.num_replicas_in_sync
    strategy, kind, names = local_placement(kind, devices)
    return strategy.scope, kind, names, devices


def for_inference(model):
    return model  # its strategy evaluates uneven last batches itself


def model_replicas(model) -> int:
    return model.distribute_strategy.num_replicas_in_sync


def local_placement(kind: str, devices: int) -> tuple[tf.distribute.Strategy, str, list[str]]:
    """(strategy, device kind, device names) for `devices` replicas on this host's GPUs or CPU."""
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if kind == "gpu" and not gpus:
        raise TrialFailed(f"This study runs on the GPU queue, but this worker child sees no GPU "
                          f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}): "
                          "route the gpu queue only to GPU hosts.")
    if devices == 1:
        # The default strategy: TensorFlow places the model on the first visible GPU, else the CPU.
        names = gpus[:1] or [tf.config.list_logical_devices("CPU")[0].name]
        return tf.distribute.get_strategy(), "gpu" if gpus else "cpu", names
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
    return tf.distribute.MirroredStrategy(devices=names), kind, names


def tpu_placement(devices: int) -> tuple[tf.distribute.Strategy, list[str]]:
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
    return strategy, cores[:devices]


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


def configure_gpu_memory(packed: int | str) -> None:
    """Each GPU this child sees as a logical device of its share when `packed` trials share it, or growing as its
    trial needs (auto, which packs only while the measured memory fits); one trial keeps TensorFlow's default."""
    from workers.host.packing import gpu_memory_bytes, tf_memory_limit_mb

    if packed == 1:
        return
    total = gpu_memory_bytes()
    limit = tf_memory_limit_mb(total // 2**20, packed) if total else None
    for gpu in tf.config.list_physical_devices("GPU"):
        if limit is None:
            tf.config.experimental.set_memory_growth(gpu, True)
        else:
            tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(memory_limit=limit)])


def configure_threads(threads: int) -> None:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def _tensor(values) -> tf.Tensor:
    if isinstance(values, tf.Tensor):
        return values
    values = np.asarray(values)
    if values.dtype.kind in "US" or values.dtype == object:
        return tf.constant(values.astype(str), dtype=tf.string)
    if values.dtype == np.float64:
        values = values.astype(np.float32)  # as Keras does with NumPy input: models compute in float32
    return tf.convert_to_tensor(values)


def batches(x, y=None, *, batch_size: int, shuffle: bool, seed: int, drop_remainder: bool,
            multiple: int = 1) -> tf.data.Dataset:
    """Batches of (x, y), reshuffled each epoch as row indices gathered in one op, as Keras does for NumPy input, so no
    row passes through a shuffle buffer."""
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
