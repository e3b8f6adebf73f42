"""A worker child's set-up for its backend, before Keras loads in it."""

import os

from workers.host.devices import cpu_devices_per_child
from workers.host.packing import child_memory_env


def configure_child(backend: str, environ=os.environ, packed: int | str = 1) -> None:
    """Before Keras loads in a worker child: its CPU devices, thread caps and XLA flags, so several children share a
    host's cores and GPUs, and its GPU memory bounded when `packed` trials share its GPU."""
    cpu_devices = cpu_devices_per_child(environ)
    environ.update(child_memory_env(backend, packed, environ))
    threads = int(environ.get("TUNEBOARD_TF_THREADS", "0") or 0)
    if backend == "jax":
        flags = environ.get("XLA_FLAGS", "").split()
        if cpu_devices > 1:
            flags.append(f"--xla_force_host_platform_device_count={cpu_devices}")
        if threads == 1:
            flags.append("--xla_cpu_multi_thread_eigen=false")
        environ["XLA_FLAGS"] = " ".join(flags)
        environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        return
    from workers.host.backends import tf_runtime  # TensorFlow workers only: a JAX worker has no TensorFlow

    tf_runtime.configure_logical_cpus(cpu_devices)
    tf_runtime.configure_gpu_memory(packed)
    if threads > 0:
        tf_runtime.configure_threads(threads)
