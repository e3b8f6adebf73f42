"""System samples on injected NVML answers: the GPUs a child was pinned to, each figure NVML gives,
a figure it refuses left out (never a failed run), and no GPU key at all without NVML."""

import types

import psutil

from workers.host.system_metrics import SystemSampler, visible_gpu_indices


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
