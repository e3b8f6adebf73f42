"""Uploading a dataset through the page: a good file is parsed, split once and stored; every
bad file is refused with a message on the page and nothing is saved."""

import io

import numpy as np
import pytest
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.models import Artifact, Dataset, StoredBlob
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.datasets import dataset_create_bundled
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db


def _csv(rows: list[str], header: str = "width,height,label") -> bytes:
    return (header + "\n" + "\n".join(rows) + "\n").encode()


def _good_csv(n: int = 60) -> bytes:
    return _csv([f"{i * 0.5},{(i * 7) % 11},{'cat' if i % 3 else 'dog'}" for i in range(n)])


def _post(client, filename: str, data: bytes, **fields):
    form = {
        "name": "shapes",
        "target_column": "label",
        "task": "auto",
        "val_fraction": 0.15,
        "test_fraction": 0.15,
        "seed": 0,
        **fields,
        "file": SimpleUploadedFile(filename, data),
    }
    return client.post(reverse("dataset_upload"), form)


def _saved() -> dict:
    return {
        "datasets": Dataset.objects.count(),
        "artifacts": Artifact.objects.count(),
        "blobs": StoredBlob.objects.count(),
    }


def _splits(dataset: Dataset) -> dict:
    with np.load(
        io.BytesIO(artifact_read_bytes(artifact=dataset.arrays)), allow_pickle=False
    ) as arrays:
        return {key: arrays[key] for key in arrays.files}


def test_a_good_csv_is_stored_with_its_split_and_shown(alice_client, acme):
    response = _post(alice_client, "shapes.csv", _good_csv(60))

    dataset = Dataset.objects.get(team=acme, name="shapes")
    assert response.status_code == 302
    assert response["Location"] == reverse("dataset_detail", args=[dataset.id])
    assert (dataset.n_rows, dataset.n_features, dataset.task) == (60, 2, "classification")
    assert dataset.classes == ["cat", "dog"]
    assert dataset.class_counts == {"cat": 40, "dog": 20}
    assert dataset.file_format == "csv"
    assert dataset.target_column == "label"

    assert storages["artifacts"].exists(dataset.arrays.storage_name)
    assert storages["artifacts"].exists(dataset.upload.storage_name)
    assert artifact_read_bytes(artifact=dataset.upload) == _good_csv(60)
    splits = _splits(dataset)
    sizes = {
        "train": len(splits["y_train"]),
        "validation": len(splits["y_val"]),
        "test": len(splits["y_test"]),
    }
    assert sizes == dataset.split_sizes
    assert sum(sizes.values()) == 60
    assert sizes["validation"] == sizes["test"] == 9
    every_row = np.concatenate([splits["train_index"], splits["val_index"], splits["test_index"]])
    assert sorted(every_row.tolist()) == list(range(60)), "each row is in exactly one split"
    assert splits["x_train"].shape == (sizes["train"], 2)


def test_the_dataset_page_shows_rows_features_class_balance_and_preview(alice_client, acme):
    response = alice_client.get(_post(alice_client, "shapes.csv", _good_csv(60))["Location"])
    text = page_text(response)

    assert response.status_code == 200
    assert "Uploaded shapes: 60 rows." in text
    assert "<dt>Rows</dt><dd>60</dd>" in text
    assert "<dt>Features</dt><dd>2</dd>" in text
    assert "Class balance" in text
    assert "<td>cat</td><td>40</td>" in text and "66.7%" in text
    assert "<td>dog</td><td>20</td>" in text and "33.3%" in text
    # Preview: the header and the first rows as uploaded.
    for column in ("width", "height", "label"):
        assert f'<th scope="col">{column}</th>' in text
    assert "<td>0.5</td><td>7.0</td><td>cat</td>" in text
    assert "train 42 · validation 9 · test 9" in text


def test_the_dataset_page_keeps_the_file_column_order_and_the_class_order(alice_client, acme):
    # PostgreSQL's jsonb reorders object keys (shorter first), so this catches pages that
    # trust the stored dict order.
    labels = ["bumblebee", "ant", "cat"]
    data = _csv(
        [f"{i},{i % 5},{i % 4},{labels[i % 3]}" for i in range(30)],
        header="zeta,mu,alphabet,insect",
    )
    response = _post(alice_client, "insects.csv", data, name="insects", target_column="insect")
    text = page_text(alice_client.get(response["Location"]))

    headers = [f'<th scope="col">{c}</th>' for c in ("zeta", "mu", "alphabet", "insect")]
    positions = [text.index(h) for h in headers]
    assert positions == sorted(positions)
    rows = [f"<tr><td>{name}</td><td>10</td>" for name in ("ant", "bumblebee", "cat")]
    positions = [text.index(r) for r in rows]
    assert positions == sorted(positions)


def test_an_npz_upload_works(alice_client, acme):
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    np.savez(buffer, x=rng.normal(size=(50, 4)).astype(np.float32), y=np.arange(50) % 5)

    response = _post(
        alice_client, "vectors.npz", buffer.getvalue(), name="vectors", target_column=""
    )

    dataset = Dataset.objects.get(team=acme, name="vectors")
    assert response.status_code == 302
    assert (dataset.n_rows, dataset.n_features, dataset.task, dataset.file_format) == (
        50,
        4,
        "classification",
        "npz",
    )
    assert dataset.class_counts == {str(k): 10 for k in range(5)}
    assert sum(dataset.split_sizes.values()) == 50
    page = alice_client.get(response["Location"])
    assert "<dt>Rows</dt><dd>50</dd>" in page_text(page)


def test_a_file_over_the_configured_limit_is_refused(alice_client, settings):
    settings.UPLOAD_MAX_MB = 1
    before = _saved()
    big = _good_csv(60) + b"".join(f"{i},{i},dog\n".encode() for i in range(120_000))
    assert len(big) > 1024 * 1024

    response = _post(alice_client, "big.csv", big)

    assert response.status_code == 200
    assert shows(response, f"The file is {len(big) / 1024 / 1024:.1f} MB; the limit is 1 MB.")
    assert _saved() == before


BAD_FILES = {
    "unparseable": (
        "data.csv",
        b"\x00\x01\x02\x03 binary \xff\xfe junk",
        {},
        "This looks like a binary file, not CSV text.",
    ),
    "ragged rows": (
        "data.csv",
        _csv(["1,2,cat", "3,dog", "5,6,cat"]),
        {},
        "Row 3 has 2 values, but the header has 3 columns.",
    ),
    "not utf-8": (
        "data.csv",
        "a,b,label\n1,2,caf\xe9\n".encode("latin-1"),
        {},
        "The file is not UTF-8 text",
    ),
    "broken npz": (
        "data.npz",
        b"this is not a zip archive",
        {"target_column": ""},
        "The file is not a valid .npz archive.",
    ),
    "empty": ("data.csv", b"", {}, "The submitted file is empty."),
    "blank": ("data.csv", b"\n\n  \n", {}, "The file is empty."),
    "header only": (
        "data.csv",
        b"width,height,label\n",
        {},
        "The file has a header row but no data rows.",
    ),
    "target missing": (
        "data.csv",
        _good_csv(),
        {"target_column": "species"},
        "There is no column named 'species'. Available columns: width, height, label.",
    ),
    "no target given": (
        "data.csv",
        _good_csv(),
        {"target_column": ""},
        "Name the target column of the CSV (the column to predict).",
    ),
    "non-numeric features": (
        "data.csv",
        _csv(["1,2,cat", "3,tall,dog", "5,6,cat"] * 5),
        {},
        "Column 'height' must contain numbers, but row 3 has 'tall'",
    ),
    "missing feature": (
        "data.csv",
        _csv(["1,2,cat", "3,,dog", "5,6,cat"] * 5),
        {},
        "Some feature values are missing: column 'height'",
    ),
    "NaN labels": (
        "data.csv",
        _csv(["1,2,cat", "3,4,NaN", "5,6,dog"] * 5),
        {},
        "5 rows have no value in the target column 'label'",
    ),
    "NaN labels in npz": (
        "data.npz",
        None,
        {"target_column": ""},
        "1 row has a missing (NaN or empty) label in y.",
    ),
    "one class only": (
        "data.csv",
        _csv([f"{i},{i},cat" for i in range(30)]),
        {},
        "The target column 'label' has only one class ('cat'); classification needs at least two.",
    ),
    "too few rows": (
        "data.csv",
        _csv(["1,2,3.5", "3,4,1.25"]),
        {},
        "The dataset has 2 rows, but a split with 15% validation and 15% test "
        "needs at least 3 rows",
    ),
    "wrong extension": (
        "data.xlsx",
        _good_csv(),
        {},
        "Upload a .csv file (with a header row), a .npz file with arrays x and y, or a .zip of images",
    ),
    "fractions leave no training rows": (
        "data.csv",
        _good_csv(),
        {"val_fraction": 0.5, "test_fraction": 0.5},
        "they must add up to less than 1",
    ),
}


def _npz_with_nan_label() -> bytes:
    buffer = io.BytesIO()
    y = np.arange(30, dtype=np.float64) % 3
    y[4] = np.nan
    np.savez(buffer, x=np.ones((30, 2)), y=y)
    return buffer.getvalue()


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_upload_shows_its_message_and_saves_nothing(alice_client, case):
    filename, data, fields, message = BAD_FILES[case]
    if data is None:
        data = _npz_with_nan_label()
    before = _saved()

    response = _post(alice_client, filename, data, **fields)

    assert response.status_code == 200
    assert shows(response, message), f"{message!r} is not on the page"
    assert _saved() == before


def test_a_duplicate_dataset_name_is_refused_and_saves_nothing(alice_client, acme, alice):
    dataset_create_bundled(team=acme, user=alice, bundled_name="iris", name="shapes")
    before = _saved()

    response = _post(alice_client, "shapes.csv", _good_csv())

    assert response.status_code == 200
    assert shows(response, "Your team already has a dataset named 'shapes'; choose another name.")
    assert _saved() == before


def test_the_same_name_in_another_team_is_fine(alice_client, acme, globex, charlie):
    dataset_create_bundled(team=globex, user=charlie, bundled_name="iris", name="shapes")
    response = _post(alice_client, "shapes.csv", _good_csv())
    assert response.status_code == 302
    assert Dataset.objects.filter(name="shapes").count() == 2


def test_adding_a_bundled_dataset_from_the_list_page_works(alice_client, acme):
    response = alice_client.post(
        reverse("dataset_list"),
        {
            "bundled_name": "wine",
            "name": "",
            "val_fraction": 0.2,
            "test_fraction": 0.1,
            "seed": 3,
        },
    )

    dataset = Dataset.objects.get(team=acme, name="wine")
    assert response.status_code == 302
    assert response["Location"] == reverse("dataset_detail", args=[dataset.id])
    assert (dataset.source, dataset.bundled_name, dataset.n_rows, dataset.n_features) == (
        "bundled",
        "wine",
        178,
        13,
    )
    assert dataset.split_sizes == {"train": 124, "validation": 36, "test": 18}
    assert dataset.upload is None
    assert sum(len(v) for k, v in _splits(dataset).items() if k.startswith("y_")) == 178
    page = page_text(alice_client.get(response["Location"]))
    assert "Added wine." in page
    assert "<dt>Rows</dt><dd>178</dd>" in page


def test_adding_the_same_bundled_dataset_twice_is_refused(alice_client, acme):
    form = {
        "bundled_name": "iris",
        "name": "",
        "val_fraction": 0.15,
        "test_fraction": 0.15,
        "seed": 0,
    }
    assert alice_client.post(reverse("dataset_list"), form).status_code == 302
    before = _saved()

    response = alice_client.post(reverse("dataset_list"), form)

    assert response.status_code == 200
    assert shows(response, "Your team already has a dataset named 'iris'; choose another name.")
    assert _saved() == before
