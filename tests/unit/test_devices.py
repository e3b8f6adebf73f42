"""One trial per device: the pinning logic on injected device lists (no GPU here)."""

from workers.devices import device_for_child, discover_gpus, host_devices, pin_child


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
