"""Several trials per GPU: the setting, each child's memory bound, `auto`'s decisions on injected throughput and
memory figures, the figures the children leave for it, and the autoscaler that sizes the pool from them."""

import os
import subprocess

import pytest

from experiments.models import Worker
from workers.host.devices import pin_child, recommended_concurrency
from workers.host.packing import (
    PackingAutoscaler,
    PackingSearch,
    ThroughputLedger,
    auto_child_slot,
    child_memory_env,
    memory_fraction,
    packing_record,
    per_gpu,
    tf_memory_limit_mb,
    trials_per_gpu,
)

GIB = 2**30


def test_the_setting_is_a_whole_number_or_auto():
    assert trials_per_gpu({}) == 1
    assert trials_per_gpu({"TUNEBOARD_TRIALS_PER_GPU": "4"}) == 4
    assert trials_per_gpu({"TUNEBOARD_TRIALS_PER_GPU": " Auto "}) == "auto"
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ValueError, match="TUNEBOARD_TRIALS_PER_GPU must be a whole number of at least 1 or auto"):
            trials_per_gpu({"TUNEBOARD_TRIALS_PER_GPU": bad})


def test_each_packed_child_gets_its_share_of_the_gpus_memory():
    # One name only: jaxlib will not start its GPU backend with both set (and every JAX reads the older one).
    assert child_memory_env("jax", 2, {}) == {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.450"}
    assert child_memory_env("jax", 4, {})["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.225"
    assert child_memory_env("jax", 1, {}) == {}  # alone on its GPU: JAX's own limit
    assert child_memory_env("jax", "auto", {}) == {}  # auto packs only while the measured memory fits
    for name in ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION"):  # the operator's own choice stands
        assert child_memory_env("jax", 2, {name: ".3"}) == {}
        assert memory_fraction({name: ".3"}) == 0.3
    assert memory_fraction({}) is None
    assert child_memory_env("tensorflow", 2, {}) == {}  # TensorFlow: a logical device of the share instead
    # 0.9/N of the GPU less a CUDA context's 512 MB, which TensorFlow's reservation does not count.
    assert tf_memory_limit_mb(81_559, 2) == 36_189 and tf_memory_limit_mb(81_559, 4) == 17_838
    assert tf_memory_limit_mb(4_000, 16) == 256  # never below a usable floor
    assert tf_memory_limit_mb(81_559, 1) is None and tf_memory_limit_mb(81_559, "auto") is None


def test_packed_children_share_a_gpu_by_design_and_the_concurrency_counts_them(caplog):
    environ = {}
    assert [pin_child(i, ["0", "1"], environ, packed=2) for i in range(4)] == ["0", "1", "0", "1"]
    assert "shares GPUs" not in caplog.text
    pin_child(4, ["0", "1"], environ, packed=2)
    assert "run this worker with concurrency 4" in caplog.text
    assert recommended_concurrency(["0", "1"], 1, trials_per_gpu=2) == 4
    assert packing_record({"CUDA_VISIBLE_DEVICES": "0,1", "TUNEBOARD_TRIALS_PER_GPU": "2"}) == {
        "setting": "2", "trials_per_gpu": 2, "reason": "TUNEBOARD_TRIALS_PER_GPU=2"}
    assert packing_record({"CUDA_VISIBLE_DEVICES": ""}) == {}


def test_auto_doubles_while_the_total_grows_by_the_margin_then_keeps_the_best():
    search = PackingSearch(max_level=8)
    assert search.observe(1000.0) == 2
    assert search.observe(1900.0) == 4 and "1.90× 1's" in search.reason
    assert search.observe(2000.0) == 2 and search.settled  # 4 gave only 1.05× of 2
    assert "4 trials per GPU trained 1.05× as fast in total as 2, under the 1.10×" in search.reason
    assert search.observe(9999.0) == 2  # settled: later figures change nothing


def test_auto_stops_where_the_next_level_would_not_fit_in_memory_or_the_maximum():
    search = PackingSearch(max_level=8)
    assert search.observe(1000.0, trial_bytes=20 * GIB, gpu_bytes=80 * GIB) == 2  # 2 × 20 GiB fits in 72
    assert search.observe(1800.0, trial_bytes=20 * GIB, gpu_bytes=80 * GIB) == 2 and search.settled
    assert "4 trials of 20.0 GiB would not fit in 90% of the GPU's 80.0 GiB" in search.reason
    capped = PackingSearch(max_level=4)
    assert [capped.observe(total) for total in (100.0, 200.0, 400.0)] == [2, 4, 4]
    assert capped.settled and "the most allowed" in capped.reason


def test_the_ledger_keeps_each_childs_latest_fresh_figure(tmp_path):
    ledger = ThroughputLedger(tmp_path / "node")
    ledger.write(pid=1, gpus="0", samples_per_second=100.0, device_bytes=GIB, clock=lambda: 1000.0)
    ledger.write(pid=1, gpus="0", samples_per_second=120.0, device_bytes=2 * GIB, clock=lambda: 1010.0)
    ledger.write(pid=2, gpus="0", samples_per_second=80.0, device_bytes=None, clock=lambda: 1010.0)
    ledger.write(pid=3, gpus="1", samples_per_second=300.0, device_bytes=GIB, clock=lambda: 400.0)  # stale
    rows = ledger.fresh(clock=lambda: 1020.0)
    assert sorted(row["samples_per_second"] for row in rows) == [80.0, 120.0]
    assert per_gpu(rows) == (200.0, 2 * GIB)
    assert per_gpu(rows + [{"gpus": "1", "samples_per_second": 100.0}]) == (150.0, 2 * GIB)  # the mean of 2 GPUs
    ledger.clear()
    assert ledger.fresh(clock=lambda: 1020.0) == []


class Pool:
    """What Celery's autoscaler asks of the prefork pool: its size, and to grow or shrink it."""

    def __init__(self, processes):
        self.num_processes = processes

    def grow(self, n):
        self.num_processes += n

    def shrink(self, n):
        self.num_processes -= n


class Node:
    hostname = "gpu1@host"


@pytest.mark.django_db
def test_the_autoscaler_sizes_the_pool_from_the_childrens_figures_and_says_why(monkeypatch, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("TUNEBOARD_TRIALS_PER_GPU", "auto")
    Worker.objects.create(name="gpu1@host", hostname="host", pid=1, queues=["gpu-jax"])
    pool = Pool(2)
    scaler = PackingAutoscaler(pool, max_concurrency=16, min_concurrency=1, worker=Node())
    assert scaler.active and scaler.groups == 2 and scaler.search.max_level == 8
    ledger = scaler.ledger

    def epoch(pid, gpus, speed):
        ledger.write(pid=pid, gpus=gpus, samples_per_second=speed, device_bytes=GIB)

    assert not scaler._maybe_scale() and pool.num_processes == 2  # nothing measured yet
    epoch(1, "0", 1000.0)
    epoch(2, "1", 1000.0)
    assert scaler._maybe_scale() and pool.num_processes == 4  # 2 trials per GPU next
    assert Worker.objects.get().packing["trials_per_gpu"] == 2
    for pid, gpus in ((1, "0"), (2, "1"), (3, "0")):
        epoch(pid, gpus, 900.0)
    assert not scaler._maybe_scale() and pool.num_processes == 4  # one child of level 2 has not reported yet
    epoch(4, "1", 900.0)
    assert scaler._maybe_scale() and pool.num_processes == 8  # 1,800 a GPU: 1.8× one trial
    for pid, gpus in ((1, "0"), (2, "1"), (3, "0"), (4, "1"), (5, "0"), (6, "1"), (7, "0"), (8, "1")):
        epoch(pid, gpus, 480.0)  # 1,920 a GPU: 1.07× two
    assert scaler._maybe_scale() and pool.num_processes == 4
    packing = Worker.objects.get().packing
    assert packing["setting"] == "auto" and packing["trials_per_gpu"] == 2
    assert packing["reason"].startswith("2 trials per GPU: 4 trials per GPU trained 1.07×")


def test_the_autoscaler_is_celerys_own_without_gpus_or_auto(monkeypatch, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("TUNEBOARD_TRIALS_PER_GPU", "auto")
    scaler = PackingAutoscaler(Pool(1), max_concurrency=4, min_concurrency=1, worker=Node())
    assert not scaler.active
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setenv("TUNEBOARD_TRIALS_PER_GPU", "2")
    assert not PackingAutoscaler(Pool(1), max_concurrency=4, min_concurrency=1, worker=Node()).active


def test_packed_children_of_an_auto_worker_spread_over_the_gpus_by_live_count(tmp_path):
    children = [subprocess.Popen(["sleep", "60"]) for _ in range(4)]
    try:
        assert [auto_child_slot(2, tmp_path, pid=c.pid) for c in children[:3]] == [0, 1, 0]
        children[0].kill()
        children[0].wait()  # group 0's first child is gone: group 0 has one live child, group 1 one
        assert auto_child_slot(2, tmp_path, pid=children[3].pid) == 0
        assert not (tmp_path / f"child-{children[0].pid}").exists()
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_a_worker_child_is_pinned_and_told_how_many_share_its_gpu(monkeypatch):
    from workers.host.packing import pin_packed_child

    monkeypatch.setenv("TUNEBOARD_TRIALS_PER_GPU", "2")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert pin_packed_child(3) == 2 and os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert pin_packed_child(3) == 1  # no GPU: nothing shared, no memory bound
