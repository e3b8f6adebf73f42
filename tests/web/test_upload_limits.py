"""What an upload may become (issue 16): its arrays unpacked, its rows and its classes are
bounded by settings, an .npz is refused from its headers before anything is unpacked, and a
refused or failed upload leaves nothing behind: no dataset, no artifact rows, no stored files
(in the database or in a folder)."""

import io
import zipfile

import numpy as np
import pytest
from django.db import DatabaseError, connection

from experiments.datasets.parsing import parse_npz
from experiments.models import Artifact, Dataset, StoredBlob
from experiments.services.datasets import dataset_create_upload
from tests.web.pages import page_text, shows
from tests.web.test_dataset_upload_view import _post

pytestmark = pytest.mark.django_db


@pytest.fixture
def artifact_folder(settings, tmp_path):
    """Artifacts in a folder, the storage without transactions, where leftovers would show."""
    folder = tmp_path / "artifacts"
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(folder)}},
    }
    return folder


def _saved(folder) -> dict:
    return {
        "datasets": Dataset.objects.count(),
        "artifacts": Artifact.objects.count(),
        "blobs": StoredBlob.objects.count(),
        "files": sorted(str(p) for p in folder.rglob("*") if p.is_file()),
    }


def _npz(compression=zipfile.ZIP_STORED, **arrays) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.save(member, array)
            archive.writestr(f"{name}.npy", member.getvalue())
    return buffer.getvalue()


def _labels_csv(labels: list[str]) -> bytes:
    return ("width,height,label\n" + "".join(f"{i},{i % 7},{label}\n" for i, label in enumerate(labels))).encode()


def _refused(client, folder, filename: str, data: bytes, message: str, **fields):
    before = _saved(folder)
    response = _post(client, filename, data, **fields)
    assert response.status_code == 200
    assert shows(response, message), f"{message!r} is not on the page"
    assert _saved(folder) == before
    return response


def test_an_npz_unpacking_past_the_dataset_limit_is_refused_before_unpacking(alice_client, artifact_folder, settings):
    settings.MAX_DATASET_MB = 1
    data = _npz(zipfile.ZIP_DEFLATED, x=np.zeros((1000, 300), np.float32), y=np.arange(1000) % 2)
    assert len(data) < 10_000
    _refused(alice_client, artifact_folder, "zeros.npz", data,
             "The arrays, once unpacked, take 1.2 MB; the limit is 1.0 MB.", target_column="")


def test_more_rows_than_the_limit_are_refused_in_a_csv_and_in_an_npz(alice_client, artifact_folder, settings):
    settings.MAX_DATASET_ROWS = 50
    _refused(alice_client, artifact_folder, "rows.csv", _labels_csv(["cat", "dog"] * 30),
             "The file has more than 50 rows, the most a dataset may have here.")
    _refused(alice_client, artifact_folder, "rows.npz", _npz(x=np.zeros((60, 2)), y=np.arange(60) % 2),
             "x has more than 50 rows, the most a dataset may have here.", target_column="")


def test_a_target_of_10000_distinct_words_is_refused_as_too_many_classes(alice_client, artifact_folder):
    _refused(alice_client, artifact_folder, "ids.csv", _labels_csv([f"customer-{i}" for i in range(10_000)]),
             "The target column 'label' has more than 1,000 distinct values; a classifier here may have at most "
             "1,000 classes. If it is a number to predict, choose regression; if it identifies each row")


def test_10000_integer_classes_are_refused_when_classification_is_asked_for(alice_client, artifact_folder):
    data = _npz(x=np.zeros((10_000, 2), np.float32), y=np.arange(10_000))
    _refused(alice_client, artifact_folder, "many.npz", data, "y has 10,000 distinct values",
             target_column="", task="classification")


def test_the_class_limit_comes_from_the_settings(alice_client, artifact_folder, settings):
    settings.MAX_CLASSES = 2
    _refused(alice_client, artifact_folder, "three.csv", _labels_csv(["a", "b", "c"] * 20),
             "The target column 'label' has 3 distinct values; a classifier here may have at most 2 classes.")


def test_an_npz_member_compressed_with_bzip2_is_refused_unread(alice_client, artifact_folder):
    data = _npz(zipfile.ZIP_BZIP2, x=np.zeros((10, 2)), y=np.arange(10) % 2)
    _refused(alice_client, artifact_folder, "bz.npz", data,
             "The array 'x' in the .npz file is compressed in a way numpy never writes", target_column="")


def test_an_npz_member_whose_bytes_were_damaged_is_refused(alice_client, artifact_folder):
    data = bytearray(_npz(x=np.zeros((100, 10)), y=np.arange(100) % 2))
    data[data.index(b"\x93NUMPY") + 1000] ^= 0xFF  # inside x's data: its CRC no longer matches
    _refused(alice_client, artifact_folder, "damaged.npz", bytes(data),
             "The array 'x' in the .npz file could not be read: it is damaged.", target_column="")


def test_an_npz_member_shorter_than_its_header_declares_is_refused_before_unpacking(alice_client, artifact_folder):
    member = io.BytesIO()
    np.save(member, np.zeros((100, 10)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("x.npy", member.getvalue()[:-800])
        y = io.BytesIO()
        np.save(y, np.arange(100) % 2)
        archive.writestr("y.npy", y.getvalue())
    _refused(alice_client, artifact_folder, "short.npz", buffer.getvalue(),
             "The array 'x' in the .npz file could not be read: it is damaged.", target_column="")


def test_classes_with_a_single_row_are_accepted_with_a_warning_on_the_page(alice_client, acme, artifact_folder):
    response = _post(alice_client, "rare.csv", _labels_csv(["cat", "dog"] * 20 + ["emu", "yak"]))

    assert response.status_code == 302
    dataset = Dataset.objects.get(team=acme, name="shapes")
    (warning,) = dataset.details["warnings"]
    assert warning.startswith("2 of the 4 classes have a single row ('emu', 'yak')")
    page = alice_client.get(response["Location"])
    assert shows(page, warning) and 'id="dataset-warning"' in page_text(page)
    assert len(list(artifact_folder.rglob("*.npz"))) == 1 and len(list(artifact_folder.rglob("*.csv"))) == 1


def test_classes_of_two_rows_or_more_get_no_warning(alice_client, acme, artifact_folder):
    _post(alice_client, "fine.csv", _labels_csv(["cat", "dog", "emu"] * 10))
    assert "warnings" not in Dataset.objects.get(team=acme, name="shapes").details


def test_a_save_the_database_refuses_after_the_files_were_stored_leaves_no_files(acme, alice, artifact_folder):
    # A real failure at the last step: PostgreSQL refuses the dataset row after both files
    # (the upload and its splits) were written to the folder.
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION refuse_dataset() RETURNS trigger AS $$ BEGIN "
                       "RAISE EXCEPTION 'no datasets today'; END $$ LANGUAGE plpgsql")
        cursor.execute("CREATE TRIGGER refuse_dataset BEFORE INSERT ON experiments_dataset "
                       "FOR EACH ROW EXECUTE FUNCTION refuse_dataset()")
    data = _labels_csv(["cat", "dog"] * 30)
    before = _saved(artifact_folder)

    with pytest.raises(DatabaseError, match="no datasets today"):
        dataset_create_upload(team=acme, user=alice, name="shapes", filename="shapes.csv", data=io.BytesIO(data),
                              size=len(data), limit_mb=50, target_column="label")

    assert _saved(artifact_folder) == before
    assert before["files"] == []


def test_the_files_of_a_successful_upload_are_kept(acme, alice, artifact_folder):
    data = _labels_csv(["cat", "dog"] * 30)
    dataset = dataset_create_upload(team=acme, user=alice, name="shapes", filename="shapes.csv",
                                    data=io.BytesIO(data), size=len(data), limit_mb=50, target_column="label")
    stored = {str(artifact_folder / a.storage_name) for a in (dataset.upload, dataset.arrays)}
    assert set(_saved(artifact_folder)["files"]) == stored
    assert (artifact_folder / dataset.upload.storage_name).read_bytes() == data


def test_a_big_endian_array_is_read_like_numpy_reads_it():
    # The dtype comes from the member's header, not from numpy.load: its byte order must survive.
    x = np.arange(12, dtype=">f8").reshape(6, 2)
    parsed = parse_npz(_npz(x=x, y=np.array([0, 1] * 3)))
    assert parsed.x.dtype == np.float32 and parsed.x.tolist() == x.astype(np.float32).tolist()
