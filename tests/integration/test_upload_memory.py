"""Issue 16: a 0.4 MB .npz of zeros unpacks to 400 MB; uploading it made the web process grow
from 185 to 1,775 MB. Uploaded through a real web process (gunicorn, as deployed) on the test
database, with the serving process's memory (children included) sampled every 10 ms, it now
stays under 300 MB (about 220) and becomes a dataset; so does a 35 MB CSV, which used to add
about 20 times its size (700 MB) to the web process."""

import numpy as np
import pytest

from benchmarks.uploads import CSV_COLUMNS, CSV_ROWS, NPZ_COLUMNS, NPZ_ROWS, measured_upload, numbers_csv, zeros_npz
from benchmarks.web_process import WebServer, login
from experiments.models import Dataset
from experiments.selectors.artifacts import artifact_copy_to_path
from tests.conftest import LOG_DIR, PASSWORD

# serial: memory sampled every 10 ms (make test runs it alone).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]

PEAK_MB = 300
FIELDS = {"task": "auto", "kind": "auto", "val_fraction": "0.15", "test_fraction": "0.15", "seed": "0"}


@pytest.fixture
def web_server(worker_env, tmp_path):
    server = WebServer({**worker_env, "TUNEBOARD_VAR_DIR": str(tmp_path / "var")}, LOG_DIR / "web-uploads.log")
    yield server
    server.stop()


def test_uploading_an_npz_that_unpacks_to_400_mb_keeps_the_web_process_under_300_mb(
    web_server, alice, acme, tmp_path
):
    npz = zeros_npz(tmp_path / "zeros.npz")
    assert npz.stat().st_size < 500_000, "a small file on the wire..."
    assert NPZ_ROWS * NPZ_COLUMNS * 4 == 400_000_000, "...that unpacks to 400 MB"
    cookie = login(web_server, alice.username, PASSWORD)

    measured = measured_upload(web_server, cookie, npz, {**FIELDS, "name": "zeros"})

    assert measured["outcome"]["status"] == 302, (measured, web_server.log()[-3000:])
    assert measured["peak_rss_mb"] <= PEAK_MB, measured
    assert measured["rss_samples"] >= 10, "the memory was sampled all along"
    dataset = Dataset.objects.get(team=acme, name="zeros")
    assert measured["outcome"]["location"] == f"/datasets/{dataset.id}/"
    assert (dataset.n_rows, dataset.n_features, dataset.kind, dataset.task) == (
        NPZ_ROWS, NPZ_COLUMNS, "tabular", "classification")
    assert sum(dataset.split_sizes.values()) == NPZ_ROWS and dataset.class_counts == {str(k): 10_000 for k in range(10)}
    # The stored splits are what a worker reads: the test split's inputs are all there, all zeros.
    path = artifact_copy_to_path(artifact=dataset.arrays, path=tmp_path / "splits.npz")
    with np.load(path) as splits:
        x_test = splits["x_test"]
        assert x_test.shape == (dataset.split_sizes["test"], NPZ_COLUMNS) and x_test.dtype == np.float32
        assert not x_test.any()
        every_row = np.sort(np.concatenate([splits["train_index"], splits["val_index"], splits["test_index"]]))
        assert np.array_equal(every_row, np.arange(NPZ_ROWS))


def test_uploading_a_35_mb_csv_keeps_the_web_process_under_300_mb(web_server, alice, acme, tmp_path):
    csv = numbers_csv(tmp_path / "numbers.csv")
    cookie = login(web_server, alice.username, PASSWORD)

    measured = measured_upload(web_server, cookie, csv, {**FIELDS, "name": "numbers", "target_column": "label"})

    assert measured["outcome"]["status"] == 302, (measured, web_server.log()[-3000:])
    assert measured["file_mb"] > 30 and measured["peak_rss_mb"] <= PEAK_MB, measured
    dataset = Dataset.objects.get(team=acme, name="numbers")
    assert (dataset.n_rows, dataset.n_features) == (CSV_ROWS, CSV_COLUMNS)
    assert dataset.classes == ["class0", "class1", "class2"]
