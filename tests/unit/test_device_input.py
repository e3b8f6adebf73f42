"""A JAX trial whose rows fit keeps them on its device: the same batches in the same order for the same seed as
the host's, the same metrics, and `input: device` on its record; the rest (too large, TensorFlow, several
devices, text) reads them from the host."""

import numpy as np
import pytest

from tests.backend_process import run_on_backend
from workers.host.compute import Placement, input_on_device

PROBE = r'''
import json, sys
import jax
import numpy as np
from django.test import override_settings
from workers.host.backends.jax_runtime import DeviceBatches, SplitBatches
from workers.training.fitting import DatasetArrays, TrialSpec, run_trial
import keras

rng = np.random.default_rng(0)
x, y = rng.normal(size=(203, 3)), rng.integers(0, 2, size=(203, 1))
out = {"same_batches": True, "batches": 0}
for shuffle in (True, False):
    host = SplitBatches(x, y, batch_size=16, shuffle=shuffle, seed=7, drop_remainder=False)
    device = DeviceBatches(x, y, batch_size=16, shuffle=shuffle, seed=7, drop_remainder=False)
    for epoch in range(2):
        for index in range(len(host)):
            (hx, hy), (dx, dy) = host[index], device[index]
            out["batches"] += 1
            out["same_batches"] &= bool(np.array_equal(hx, np.asarray(dx)) and np.array_equal(hy, np.asarray(dy)))
            out["device_array"] = isinstance(dx, jax.Array)
        host.on_epoch_end(); device.on_epoch_end()

def build():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs))
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model

class Reporter:
    def __init__(self):
        self.logs = []
    def epoch_end(self, execution, epoch, logs):
        self.logs.append(logs)
        return True

data = DatasetArrays(x[:160], y[:160], x[160:], y[160:], x[160:], y[160:])
spec = TrialSpec("val_loss", "min", 3, 16, 5, 1, 3)
from workers.host.backends import jax_runtime
out["cpu_free_memory"] = jax_runtime.free_memory()  # the CPU: the rows stay where they are
reporter = Reporter()
out["cpu"] = run_trial(build=build, spec=spec, data=data, reporter=reporter, workdir=sys.argv[1]).compute["input"]
jax_runtime.free_memory = lambda: 8 * 2**30  # the CPU branch standing in for an accelerator with 8 GiB free
for percent in (50, 0):
    reporter = Reporter()
    with override_settings(DEVICE_INPUT_PERCENT=percent):
        result = run_trial(build=build, spec=spec, data=data, reporter=reporter, workdir=sys.argv[1])
    out[str(percent)] = {"input": result.compute["input"], "logs": reporter.logs}
print("RESULT " + json.dumps(out))
'''


def test_a_jax_trial_keeps_its_rows_on_the_device_with_the_same_batches_and_metrics(tmp_path):
    out = run_on_backend("jax", PROBE, str(tmp_path))
    assert out["batches"] == 2 * 2 * 13 and out["same_batches"] and out["device_array"] is True, out
    assert out["cpu_free_memory"] is None and out["cpu"] == "host"  # no copy of memory-mapped rows on a CPU
    on_device, on_host = out["50"], out["0"]
    assert on_device["input"] == "device" and on_host["input"] == "host"
    assert len(on_device["logs"]) == len(on_host["logs"]) == 3
    for device_logs, host_logs in zip(on_device["logs"], on_host["logs"], strict=True):
        assert device_logs.keys() == host_logs.keys()
        for name, value in device_logs.items():
            assert value == pytest.approx(host_logs[name], rel=1e-5, abs=1e-6), name


def _placement(backend="jax", replicas=1):
    return Placement(scope=None, device_kind="gpu", device_names=["gpu:0"], replicas=replicas, backend=backend)


def test_rows_stay_on_the_device_only_within_the_share_of_its_free_memory_on_one_jax_device():
    rows = [np.zeros((1000, 10), np.float64), np.zeros((1000, 1), np.int64)]  # 40 KB as float32, 8 KB
    needed = 1000 * 10 * 4 + 1000 * 8
    assert input_on_device(_placement(), rows, percent=50, free_memory=lambda: 2 * needed)
    assert not input_on_device(_placement(), rows, percent=50, free_memory=lambda: 2 * needed - 1)
    assert input_on_device(_placement(), rows, percent=100, free_memory=lambda: needed)
    tpu = Placement(scope=None, device_kind="tpu", device_names=["tpu:0"], replicas=1, backend="jax")
    assert input_on_device(tpu, rows, percent=50, free_memory=lambda: 2 * needed)  # a TPU core alike
    assert not input_on_device(_placement(), rows, percent=0, free_memory=lambda: 10**12)
    assert not input_on_device(_placement(), rows, percent=50, free_memory=lambda: None)  # a device that will not say
    assert not input_on_device(_placement("tensorflow"), rows, percent=50, free_memory=lambda: 10**12)
    assert not input_on_device(_placement(replicas=2), rows, percent=50, free_memory=lambda: 10**12)
    text = [np.array(["a b", "c"]), np.zeros(2)]
    assert not input_on_device(_placement(), text, percent=50, free_memory=lambda: 10**12)
