"""What a running trial or job uses of its host, measured in its worker child: the process's CPU %
(100 = one core) and RSS, the host's 1-minute load, and for each GPU the child sees (its
CUDA_VISIBLE_DEVICES, else all) utilisation %, memory used and total, power and temperature
from the NVIDIA Management Library (nvidia-ml-py). A host without NVML (no GPU, no driver)
gives no GPU figures: the keys are absent, not zero, and an NVML error never fails the run.
Besides: the device memory the Keras backend itself reports (JAX memory_stats, TensorFlow
get_memory_info) for its accelerators, and the samples per second the run's last epoch trained."""

import logging
import os
import sys
import time

import psutil

log = logging.getLogger(__name__)


def _nvml():
    """pynvml, initialised, or None where the host has no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # the library, the driver or a GPU missing: no GPU figures
        return None


def visible_gpu_indices(count: int, environ=os.environ) -> list[int]:
    """The GPUs a child was pinned to (workers/host/devices.py sets CUDA_VISIBLE_DEVICES), by index."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    indices = [int(part) for part in visible.split(",") if part.strip().isdigit()]
    return [index for index in indices if index < count]


LOAD_NVML = object()
# The last epoch's samples per second in this process and when it was measured (the training
# callback writes it, the sampler reads it): a figure older than this is no longer the run's.
_THROUGHPUT: dict = {"value": None, "at": 0.0}
THROUGHPUT_FRESH_SECONDS = 600


def report_throughput(samples_per_second: float) -> None:
    _THROUGHPUT.update(value=samples_per_second, at=time.monotonic())


def _jax_memory(jax) -> list[dict]:
    found = []
    for device in jax.local_devices():
        stats = device.memory_stats() if device.platform != "cpu" else None
        if stats:
            found.append({"device": str(device), "bytes_in_use": stats.get("bytes_in_use"),
                          "peak_bytes_in_use": stats.get("peak_bytes_in_use"), "bytes_limit": stats.get("bytes_limit")})
    return found


def _tensorflow_memory(tf) -> list[dict]:
    found = []
    for device in tf.config.list_logical_devices("GPU"):
        info = tf.config.experimental.get_memory_info(device.name)
        found.append({"device": device.name, "bytes_in_use": info.get("current"),
                      "peak_bytes_in_use": info.get("peak")})
    return found


def backend_memory(modules=sys.modules) -> list[dict]:
    """Accelerator memory as the Keras backend this process trains with counts it; [] on CPU, before
    Keras is loaded, or when the backend will not say. Nothing is imported or initialised here: a
    library that merely imported JAX in a TensorFlow child must not start JAX's runtime."""
    try:
        keras = modules.get("keras")
        name = keras.backend.backend() if keras is not None else None
        read = {"jax": _jax_memory, "tensorflow": _tensorflow_memory}.get(name)
        if read is None or name not in modules:
            return []
        return read(modules[name])
    except Exception:  # Keras half-imported, a backend without the call, a device that refuses: no figure
        log.debug("no device memory from the backend", exc_info=True)
        return []


class SystemSampler:
    """`nvml`: the NVML binding to read (tests inject one), None for none, by default pynvml if it loads."""

    def __init__(self, process: psutil.Process | None = None, nvml=LOAD_NVML, environ=os.environ):
        self.process = process or psutil.Process()
        self.process.cpu_percent(None)  # the first call starts the interval the next one measures
        _THROUGHPUT["value"] = None  # a new run: an earlier run's speed is not its own
        self.nvml = _nvml() if nvml is LOAD_NVML else nvml
        self.gpus: list[tuple[int, object]] = []
        if self.nvml is not None:
            try:
                count = self.nvml.nvmlDeviceGetCount()
                self.gpus = [(index, self.nvml.nvmlDeviceGetHandleByIndex(index))
                             for index in visible_gpu_indices(count, environ)]
            except Exception:
                log.warning("NVML lists no GPU: samples carry no GPU figures", exc_info=True)

    def sample(self) -> dict:
        values = {"cpu_percent": round(self.process.cpu_percent(None), 1),
                  "rss_bytes": self.process.memory_info().rss, "load1": round(os.getloadavg()[0], 2)}
        if self.gpus:
            values["gpus"] = [self._gpu(index, handle) for index, handle in self.gpus]
        if _THROUGHPUT["value"] is not None and time.monotonic() - _THROUGHPUT["at"] < THROUGHPUT_FRESH_SECONDS:
            values["samples_per_second"] = round(_THROUGHPUT["value"], 1)
            # Only once this run trained an epoch: its backend's devices are up, so asking them
            # their memory starts no runtime (a job that never trains never asks).
            if memory := backend_memory():
                values["device_memory"] = memory
        return values

    def _gpu(self, index: int, handle) -> dict:
        nvml, figures = self.nvml, {"index": index}
        readers = {
            "utilization_percent": lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
            "memory_used_bytes": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used,
            "memory_total_bytes": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total,
            "power_watts": lambda: round(nvml.nvmlDeviceGetPowerUsage(handle) / 1000, 1),
            "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
        }
        for name, read in readers.items():
            try:
                figures[name] = read()
            except Exception:  # one figure this GPU cannot give (power on some boards): left out
                continue
        return figures
