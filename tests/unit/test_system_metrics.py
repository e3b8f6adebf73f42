"""System samples on injected NVML answers: the GPUs a child was pinned to, each figure NVML gives,
a figure it refuses left out (never a failed run), and no GPU key at all without NVML."""

import types

import psutil

from workers.host import system_metrics
from workers.host.system_metrics import SystemSampler, backend_memory, report_throughput, visible_gpu_indices


class FakeNvml:
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, count=4, power_fails=False):
        self.count, self.power_fails = count, power_fails

    def nvmlDeviceGetCount(self):  # noqa: N802 - NVML's names
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return index

    def nvmlDeviceGetUtilizationRates(self, handle):  # noqa: N802
        return types.SimpleNamespace(gpu=10 * (handle + 1))

    def nvmlDeviceGetMemoryInfo(self, handle):  # noqa: N802
        return types.SimpleNamespace(used=handle * 2**30, total=80 * 2**30)

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        if self.power_fails:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return 250_500

    def nvmlDeviceGetTemperature(self, handle, sensor):  # noqa: N802
        return 60 + handle


def test_the_gpus_a_child_was_pinned_to_are_sampled_with_every_figure():
    sampler = SystemSampler(psutil.Process(), nvml=FakeNvml(), environ={"CUDA_VISIBLE_DEVICES": "1,3"})
    values = sampler.sample()
    assert values["rss_bytes"] > 0 and values["cpu_percent"] >= 0 and values["load1"] >= 0
    assert values["gpus"] == [
        {"index": 1, "utilization_percent": 20, "memory_used_bytes": 2**30, "memory_total_bytes": 80 * 2**30,
         "power_watts": 250.5, "temperature_c": 61},
        {"index": 3, "utilization_percent": 40, "memory_used_bytes": 3 * 2**30, "memory_total_bytes": 80 * 2**30,
         "power_watts": 250.5, "temperature_c": 63},
    ]


def test_a_figure_nvml_refuses_is_left_out_and_a_host_without_nvml_has_no_gpu_key():
    (gpu,) = SystemSampler(psutil.Process(), nvml=FakeNvml(count=1, power_fails=True), environ={}).sample()["gpus"]
    assert "power_watts" not in gpu and gpu["utilization_percent"] == 10
    assert "gpus" not in SystemSampler(psutil.Process(), nvml=None, environ={}).sample()
    assert "gpus" not in SystemSampler(psutil.Process(), environ={}).sample(), "this host has no NVIDIA driver"


def test_visible_devices_by_index():
    assert visible_gpu_indices(4, {}) == [0, 1, 2, 3]
    assert visible_gpu_indices(4, {"CUDA_VISIBLE_DEVICES": "2"}) == [2]
    assert visible_gpu_indices(2, {"CUDA_VISIBLE_DEVICES": "1,5"}) == [1]
    assert visible_gpu_indices(4, {"CUDA_VISIBLE_DEVICES": ""}) == []


def _keras(backend):
    return types.SimpleNamespace(backend=types.SimpleNamespace(backend=lambda: backend))


class FakeJaxDevice:
    def __init__(self, platform, index):
        self.platform, self.index = platform, index

    def memory_stats(self):
        return {"bytes_in_use": 3 * 2**30, "peak_bytes_in_use": 5 * 2**30, "bytes_limit": 80 * 2**30}

    def __str__(self):
        return f"{self.platform}:{self.index}"


def test_device_memory_comes_from_the_backend_already_imported_and_never_on_cpu():
    jax = types.SimpleNamespace(local_devices=lambda: [FakeJaxDevice("cpu", 0), FakeJaxDevice("gpu", 1)])
    assert backend_memory({"keras": _keras("jax"), "jax": jax}) == [{
        "device": "gpu:1", "bytes_in_use": 3 * 2**30, "peak_bytes_in_use": 5 * 2**30, "bytes_limit": 80 * 2**30}]
    assert backend_memory({"jax": jax}) == []  # nothing trained yet in this process: no import, no figure
    # JAX imported by some library in a TensorFlow child is never asked (that would start its runtime).
    assert backend_memory({"keras": _keras("tensorflow"), "jax": jax}) == []

    def refuses():
        raise RuntimeError("no memory_stats on this platform")

    assert backend_memory({"keras": _keras("jax"), "jax": types.SimpleNamespace(local_devices=refuses)}) == []


def test_tensorflow_reports_each_logical_gpus_current_and_peak():
    config = types.SimpleNamespace(
        list_logical_devices=lambda kind: [types.SimpleNamespace(name="/device:GPU:0")],
        experimental=types.SimpleNamespace(get_memory_info=lambda name: {"current": 2**20, "peak": 2**21}))
    tf = types.SimpleNamespace(config=config)
    assert backend_memory({"keras": _keras("tensorflow"), "tensorflow": tf}) == [
        {"device": "/device:GPU:0", "bytes_in_use": 2**20, "peak_bytes_in_use": 2**21}]


def test_samples_carry_the_last_epochs_speed_of_this_run_only():
    report_throughput(1234.56)  # an earlier run's
    sampler = SystemSampler(psutil.Process(), nvml=None)
    assert "samples_per_second" not in sampler.sample()
    report_throughput(987.66)
    assert sampler.sample()["samples_per_second"] == 987.7


def test_device_memory_is_asked_only_once_the_run_trained_an_epoch(monkeypatch):
    asked = []
    monkeypatch.setattr(system_metrics, "backend_memory", lambda: asked.append(1) or [{"device": "gpu:0"}])
    sampler = SystemSampler(psutil.Process(), nvml=None)
    assert "device_memory" not in sampler.sample() and not asked  # no epoch yet: no runtime started for it
    report_throughput(100.0)
    assert sampler.sample()["device_memory"] == [{"device": "gpu:0"}]
