"""One trial per device, or per group of devices: the pinning logic on injected device lists
(no GPU here)."""

import logging

import pytest

from workers.host.devices import (
    child_devices,
    cpu_devices_per_child,
    device_for_child,
    discover_gpus,
    gpus_for_child,
    gpus_per_child,
    host_devices,
    pin_child,
    recommended_concurrency,
)


def test_each_child_of_a_worker_with_n_children_on_n_gpus_gets_its_own_gpu():
    gpus = ["0", "1", "2", "3"]
    assert [device_for_child(i, gpus) for i in range(4)] == ["0", "1", "2", "3"]


def test_more_children_than_gpus_share_them_round_robin():
    assert [device_for_child(i, ["0", "1"]) for i in range(4)] == ["0", "1", "0", "1"]


def test_without_gpus_a_child_is_not_pinned_and_runs_on_the_cpu():
    environ = {}
    assert pin_child(3, [], environ) is None
    assert "CUDA_VISIBLE_DEVICES" not in environ


def test_pinning_sets_cuda_visible_devices_before_tensorflow_loads():
    environ = {"CUDA_VISIBLE_DEVICES": "2,3"}
    gpus = discover_gpus(environ)
    assert gpus == ["2", "3"]
    assert pin_child(1, gpus, environ) == "3"
    assert environ["CUDA_VISIBLE_DEVICES"] == "3"


def test_a_hidden_gpu_list_means_no_gpu():
    assert discover_gpus({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert discover_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []


def test_host_devices_always_include_the_cpu():
    assert host_devices({"CUDA_VISIBLE_DEVICES": "0"})[:2] == ["cpu", "gpu:0"]


def test_eight_gpus_at_two_per_child_make_four_groups_one_per_child():
    gpus = [str(g) for g in range(8)]
    assert [gpus_for_child(i, gpus, 2) for i in range(4)] == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    assert recommended_concurrency(gpus, 2) == 4


def test_gpus_left_over_after_the_last_whole_group_stay_unused():
    gpus = ["0", "1", "2", "3", "4"]
    assert [gpus_for_child(i, gpus, 2) for i in range(2)] == [["0", "1"], ["2", "3"]]
    assert recommended_concurrency(gpus, 2) == 2


def test_children_beyond_the_groups_share_them_round_robin_with_a_warning(caplog):
    environ = {}
    with caplog.at_level(logging.WARNING, logger="workers.host.devices"):
        assert pin_child(1, ["0", "1", "2", "3"], environ, per_child=2) == "2,3"
        assert not caplog.records
        assert pin_child(2, ["0", "1", "2", "3"], environ, per_child=2) == "0,1"
    assert environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "run this worker with concurrency 2" in caplog.text


def test_gpus_per_child_comes_from_the_environment():
    environ = {"TUNEBOARD_GPUS_PER_CHILD": "4"}
    assert pin_child(1, [str(g) for g in range(8)], environ) == "4,5,6,7"
    assert environ["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_a_child_wanting_more_gpus_than_the_host_has_sees_them_all():
    assert gpus_for_child(0, ["0", "1"], 4) == ["0", "1"]
    assert recommended_concurrency(["0", "1"], 4) == 1


def test_without_gpus_there_is_no_gpu_concurrency_to_recommend():
    assert recommended_concurrency([], 2) is None
    assert pin_child(0, [], {"TUNEBOARD_GPUS_PER_CHILD": "2"}) is None


def test_device_counts_from_the_environment_must_be_whole_numbers_of_at_least_one():
    assert gpus_per_child({}) == 1 and cpu_devices_per_child({}) == 1
    assert cpu_devices_per_child({"TUNEBOARD_CPU_DEVICES": "2"}) == 2
    with pytest.raises(ValueError, match="TUNEBOARD_GPUS_PER_CHILD must be a whole number of at least 1, not '0'"):
        gpus_per_child({"TUNEBOARD_GPUS_PER_CHILD": "0"})
    with pytest.raises(ValueError, match="TUNEBOARD_CPU_DEVICES must be a whole number of at least 1, not 'two'"):
        cpu_devices_per_child({"TUNEBOARD_CPU_DEVICES": "two"})


def test_a_jobs_device_time_counts_what_its_queue_holds_on_the_childs_host():
    chips = ["/dev/accel0", "/dev/accel1", "/dev/accel2", "/dev/accel3"]
    assert child_devices(queue="gpu", environ={"CUDA_VISIBLE_DEVICES": "2,3"}, tpus=lambda: []) == ("gpu", 2)
    assert child_devices(queue="gpu-jax", environ={"CUDA_VISIBLE_DEVICES": "0"}, tpus=lambda: []) == ("gpu", 1)
    assert child_devices(queue="gpu", environ={"CUDA_VISIBLE_DEVICES": "-1"}, tpus=lambda: []) == ("cpu", 1)
    assert child_devices(queue="tpu-jax", environ={}, tpus=lambda: chips) == ("tpu", 4)
    # A CPU job (an ensemble, a conversion) on an accelerator host holds none of its accelerators.
    assert child_devices(queue="cpu", environ={"CUDA_VISIBLE_DEVICES": "1"}, tpus=lambda: chips) == ("cpu", 1)
