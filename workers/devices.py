"""What accelerators a worker host has, and which one each worker child uses.

Discovery never imports TensorFlow: the main Celery process forks its children, and a
child must be pinned (CUDA_VISIBLE_DEVICES) before TensorFlow loads in it.
"""

import glob
import os
import shutil
import subprocess


def discover_gpus(environ=os.environ) -> list[str]:
    """GPU ids visible to this host: CUDA_VISIBLE_DEVICES if set, else `nvidia-smi -L`."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


def discover_tpus() -> list[str]:
    return sorted(glob.glob("/dev/accel*")) or (["tpu"] if os.environ.get("TPU_NAME") else [])


def host_devices(environ=os.environ) -> list[str]:
    return ["cpu"] + [f"gpu:{g}" for g in discover_gpus(environ)] + [f"tpu:{t}" for t in discover_tpus()]


def device_for_child(child_index: int, gpus: list[str]) -> str | None:
    """One trial per device: child i of a worker with N children on N GPUs gets GPU i.
    With more children than GPUs they share round-robin; with no GPU, None (CPU)."""
    if not gpus:
        return None
    return gpus[child_index % len(gpus)]


def pin_child(child_index: int, gpus: list[str], environ=os.environ) -> str | None:
    device = device_for_child(child_index, gpus)
    if device is not None:
        environ["CUDA_VISIBLE_DEVICES"] = device
    return device


def configure_threads() -> None:
    """Cap TensorFlow's thread pools (TUNEBOARD_TF_THREADS) before any op runs: several
    worker processes on one host must not each claim every core."""
    threads = int(os.environ.get("TUNEBOARD_TF_THREADS", "0") or 0)
    if threads <= 0:
        return
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
