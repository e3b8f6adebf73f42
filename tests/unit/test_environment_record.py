"""The environment record a worker writes: the dataset's stored hashes and split, the seed,
package versions, the host and devices, and which code built the model (a module's
__version__ when it declares one, and the sha256 of its source file)."""

import hashlib
import socket
from pathlib import Path

import pytest

from experiments.services.datasets import dataset_create_bundled
from tests.conftest import TEST_HYPERMODELS
from workers.host.environment import environment_record, hypermodel_identity

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(autouse=True)
def team_hypermodels(settings):
    settings.HYPERMODELS = [*TEST_HYPERMODELS.split(","),
                            "versioned=tests.fixtures.versioned_hypermodel:build_versioned"]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_team_hypermodel_is_named_by_its_source_file_hash():
    identity = hypermodel_identity("tiny")
    assert identity == {"name": "tiny", "team": True, "target": "tests.fixtures.hypermodels:build_tiny",
                        "module": "tests.fixtures.hypermodels", "version": None,
                        "source_sha256": _sha256(FIXTURES / "hypermodels.py")}


def test_a_declared_version_is_recorded_beside_the_hash():
    identity = hypermodel_identity("versioned")
    assert identity["version"] == "2.1.0"
    assert identity["source_sha256"] == _sha256(FIXTURES / "versioned_hypermodel.py")


def test_a_keras_tuner_hypermodel_class_is_named_by_its_class():
    identity = hypermodel_identity("slow")
    assert identity["target"] == "tests.fixtures.hypermodels:SlowTiny" and identity["team"] is True


def test_a_built_in_family_is_hashed_too():
    import workers.hypermodels.dense as dense

    identity = hypermodel_identity("dense")
    assert identity["team"] is False and identity["target"] == "workers.hypermodels.dense:build_dense"
    assert identity["source_sha256"] == _sha256(Path(dense.__file__))


def test_an_unknown_hypermodel_is_recorded_with_the_reason():
    identity = hypermodel_identity("gone")
    assert identity["name"] == "gone" and "No hypermodel named 'gone'" in identity["error"]


def test_the_record_holds_dataset_hashes_split_seed_versions_host_and_devices(acme, alice):
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris", seed=5)
    compute = {"device_kind": "cpu", "device_names": ["/job:localhost/replica:0/task:0/device:CPU:0"],
               "replicas": 1, "precision": "float32"}
    record = environment_record(dataset=dataset, seed=9, hypermodel="tiny", compute=compute,
                                training={"epochs": 3})
    assert record["seed"] == 9 and record["host"] == socket.gethostname()
    assert record["devices"] == {"kind": "cpu", "names": compute["device_names"], "replicas": 1}
    assert record["dataset"] == {
        "id": dataset.id, "name": "iris", "sha256": dataset.arrays.sha256, "upload_sha256": None,
        "split": {"seed": 5, "val_fraction": dataset.val_fraction, "test_fraction": dataset.test_fraction,
                  "sizes": dataset.split_sizes}}
    assert len(record["dataset"]["sha256"]) == 64
    import keras
    import keras_tuner
    import numpy
    import tensorflow

    versions = record["versions"]
    assert (versions["tensorflow"], versions["keras"], versions["keras-tuner"], versions["numpy"]) == (
        tensorflow.__version__, keras.__version__, keras_tuner.__version__, numpy.__version__)
    assert versions["python"].count(".") == 2 and versions["tuneboard"] not in ("", "missing")
    assert record["hypermodel"]["name"] == "tiny" and record["training"] == {"epochs": 3}


def test_an_ensemble_records_no_hypermodel_and_a_run_without_devices_says_none(acme, alice):
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    record = environment_record(dataset=dataset, seed=0, hypermodel=None, compute=None)
    assert "hypermodel" not in record and "training" not in record and record["devices"] is None
