"""What accelerators a worker host has and which one each worker child uses, found without importing TensorFlow
so a child can be pinned before TensorFlow loads."""

import glob
import logging
import os
import shutil
import subprocess

log = logging.getLogger(__name__)


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
    """TPU chips on this host: /dev/accel* (TPU v2-v4 VMs) or numbered /dev/vfio nodes (v5e and
    later), else one named TPU node (TPU_NAME)."""
    local = glob.glob("/dev/accel*") + [p for p in glob.glob("/dev/vfio/*") if os.path.basename(p).isdigit()]
    return sorted(local) or (["tpu"] if os.environ.get("TPU_NAME") else [])


def child_devices(*, queue: str, environ=os.environ, tpus=discover_tpus) -> tuple[str, int]:
    """The kind and number of devices this worker child holds for a job of `queue` ("gpu",
    "tpu-jax", ...), for its device time: on a gpu queue the GPUs it was pinned to
    (CUDA_VISIBLE_DEVICES), on a tpu queue the host's TPU chips, and one CPU otherwise (a CPU
    job on an accelerator host holds no accelerator)."""
    kind = queue.split("-")[0]
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if kind == "gpu" and visible is not None and (gpus := discover_gpus(environ)):
        return "gpu", len(gpus)
    if kind == "tpu" and (chips := tpus()):
        return "tpu", len(chips)
    return "cpu", 1


def host_devices(environ=os.environ) -> list[str]:
    return ["cpu"] + [f"gpu:{g}" for g in discover_gpus(environ)] + [f"tpu:{t}" for t in discover_tpus()]


def device_for_child(child_index: int, gpus: list[str]) -> str | None:
    """One trial per device: child i of a worker with N children on N GPUs gets GPU i.
    With more children than GPUs they share round-robin; with no GPU, None (CPU)."""
    if not gpus:
        return None
    return gpus[child_index % len(gpus)]


def gpus_for_child(child_index: int, gpus: list[str], per_child: int) -> list[str]:
    """The `per_child` GPUs child i trains on: the host's GPUs cut into groups, one per child, shared round-robin
    beyond them."""
    if per_child < 1:
        raise ValueError(f"GPUs per child must be at least 1, not {per_child}.")
    groups = len(gpus) // per_child
    if groups == 0:
        return list(gpus)
    group = child_index % groups
    return list(gpus[group * per_child:(group + 1) * per_child])


def recommended_concurrency(gpus: list[str], per_child: int, trials_per_gpu: int = 1) -> int | None:
    """How many children a GPU worker should run: `trials_per_gpu` per whole group of `per_child` GPUs.
    None without GPUs (a CPU worker's concurrency is a matter of cores and TUNEBOARD_TF_THREADS)."""
    if not gpus:
        return None
    return max(1, len(gpus) // max(1, per_child)) * trials_per_gpu


def _positive_int(environ, name: str, default: int) -> int:
    raw = str(environ.get(name, default)).strip() or str(default)
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {raw!r}.")
    return int(raw)


def gpus_per_child(environ=os.environ) -> int:
    """TUNEBOARD_GPUS_PER_CHILD: how many GPUs each worker child (one trial at a time) gets."""
    return _positive_int(environ, "TUNEBOARD_GPUS_PER_CHILD", 1)


def cpu_devices_per_child(environ=os.environ) -> int:
    """TUNEBOARD_CPU_DEVICES: how many logical devices each worker child splits its CPU into,
    so CPU studies can run several replicas per trial."""
    return _positive_int(environ, "TUNEBOARD_CPU_DEVICES", 1)


def pin_child(child_index: int, gpus: list[str], environ=os.environ, per_child: int | None = None,
              packed: int = 1) -> str | None:
    """Make only this child's GPUs visible to it (TUNEBOARD_GPUS_PER_CHILD of them unless
    `per_child` is given); returns the CUDA_VISIBLE_DEVICES value set, None without GPUs. Children
    beyond the groups share them round-robin: `packed` (TUNEBOARD_TRIALS_PER_GPU) of them a group by design."""
    per_child = gpus_per_child(environ) if per_child is None else per_child
    devices = gpus_for_child(child_index, gpus, per_child)
    if not devices:
        return None
    groups = len(gpus) // per_child
    if groups == 0:
        log.warning("this host has %d GPUs, fewer than TUNEBOARD_GPUS_PER_CHILD=%d: trials that need %d will fail",
                    len(gpus), per_child, per_child)
    elif child_index >= groups * packed:
        log.warning("worker child %d shares GPUs %s with child %d: %d GPUs at %d per child and %d trials per GPU "
                    "make %d slots, so run this worker with concurrency %d", child_index, ",".join(devices),
                    child_index % groups, len(gpus), per_child, packed, groups * packed, groups * packed)
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
    return environ["CUDA_VISIBLE_DEVICES"]
