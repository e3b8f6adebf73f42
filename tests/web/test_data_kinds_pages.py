"""Images, text and sequences through the pages: uploads of each kind (and bad ones, refused
with a message and nothing saved), the study form offering only the hypermodels that fit the
dataset, and the compute settings with their rules."""

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from PIL import Image

from experiments.models import Artifact, Dataset, StoredBlob, Study
from experiments.services.datasets import dataset_create_bundled
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db


def _png(value: int, size=(8, 8), mode="L") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, size, color=value if mode == "L" else (value, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


def _zip(entries: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _two_classes(n: int = 12) -> dict[str, bytes]:
    return {f"{label}/{i}.png": _png(40 * i % 255) for label in ("cats", "dogs") for i in range(n)}


def _post(client, filename: str, data: bytes, **fields):
    form = {"name": "upload", "kind": "auto", "task": "auto", "horizon": 1, "color_mode": "auto",
            "val_fraction": 0.2, "test_fraction": 0.2, "seed": 0, **fields,
            "file": SimpleUploadedFile(filename, data)}
    return client.post(reverse("dataset_upload"), form)


def _saved() -> dict:
    return {"datasets": Dataset.objects.count(), "artifacts": Artifact.objects.count(),
            "blobs": StoredBlob.objects.count()}


def test_an_image_zip_is_stored_as_uint8_images_with_counts_and_skipped_files(alice_client, acme):
    entries = {**_two_classes(), "cats/notes.txt": b"hello"}
    response = _post(alice_client, "pets.zip", _zip(entries), image_size="16x16")
    assert response.status_code == 302
    dataset = Dataset.objects.get(team=acme, name="upload")
    assert dataset.kind == "image" and dataset.input_shape == [16, 16, 1]
    assert dataset.class_counts == {"cats": 12, "dogs": 12}
    page = alice_client.get(reverse("dataset_detail", args=[dataset.id])).content.decode()
    assert "16×16×1" in page and "notes.txt" in page and "grayscale" in page


def _traversal() -> bytes:
    return _zip({**_two_classes(), "../evil/escape.png": _png(1)})


def _bomb() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_BZIP2) as archive:
        for label in ("a", "b"):
            archive.writestr(f"{label}/0.png", _png(1))
        archive.writestr("a/huge.png", b"\0" * (20 * 1024 * 1024))  # 20 MB of zeros in ~50 bytes
    return buffer.getvalue()


def _series(rows: int) -> bytes:
    return ("value\n" + "\n".join(str(i % 7) for i in range(rows)) + "\n").encode()


BAD_UPLOADS = {
    "empty zip": ("x.zip", _zip({}), {}, "empty"),
    "one class": ("x.zip", _zip({f"cats/{i}.png": _png(i) for i in range(5)}), {}, "class"),
    "corrupt image": ("x.zip", _zip({**_two_classes(), "dogs/broken.png": b"\x89PNG not really"}), {},
                      "broken.png"),
    "path traversal": ("x.zip", _traversal(), {}, "escape.png"),
    "zip bomb": ("x.zip", _bomb(), {}, "huge.png"),
    "empty text column": ("x.csv", b"text,label\n,a\n,b\n,a\n", {"text_column": "text", "target_column": "label"},
                          "empty"),
    "window longer than the series": ("x.csv", _series(10), {"target_column": "value", "window": 20},
                                      "longer than the series"),
    "images as csv": ("x.csv", b"a,b\n1,2\n", {"kind": "image", "target_column": "b"}, ".zip"),
    "bad image size": ("x.zip", _zip(_two_classes()), {"image_size": "big"}, "height×width"),
}


@pytest.mark.parametrize("case", BAD_UPLOADS, ids=list(BAD_UPLOADS))
def test_a_bad_upload_is_refused_with_a_message_and_nothing_is_saved(alice_client, acme, case):
    filename, data, fields, message = BAD_UPLOADS[case]
    before = _saved()
    response = _post(alice_client, filename, data, **fields)
    assert response.status_code == 200
    assert message.lower() in page_text(response).lower(), page_text(response)[:1500]
    assert _saved() == before


def test_a_text_csv_and_a_time_series_csv_become_text_and_sequence_datasets(alice_client, acme):
    texts = "\n".join(f"{'great value' if i % 2 else 'awful service'} number {i},{'pos' if i % 2 else 'neg'}"
                      for i in range(40))
    assert _post(alice_client, "t.csv", f"review,label\n{texts}\n".encode(), name="texts", text_column="review",
                 target_column="label").status_code == 302
    text = Dataset.objects.get(name="texts")
    assert text.kind == "text" and text.class_counts == {"neg": 20, "pos": 20}
    assert "great value" in alice_client.get(reverse("dataset_detail", args=[text.id])).content.decode()

    assert _post(alice_client, "s.csv", _series(100), name="series", target_column="value", window=10,
                 horizon=3).status_code == 302
    series = Dataset.objects.get(name="series")
    assert series.kind == "sequence" and series.input_shape == [10, 1] and series.task == "regression"
    page = alice_client.get(reverse("dataset_detail", args=[series.id])).content.decode()
    assert "split by time" in page


def test_the_study_form_offers_only_hypermodels_that_fit_the_dataset(alice_client, acme, alice):
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    page = alice_client.get(reverse("study_new") + f"?dataset={images.id}").content.decode()
    kinds = json.loads(page.split('id="hypermodel-kinds" type="application/json">')[1].split("</script>")[0])
    assert "image" in kinds["cnn"] and "image" not in kinds["text"]
    # Opened from an image dataset, the form starts on an image hypermodel and its space.
    assert '<option value="cnn" selected>' in page

    response = alice_client.post(reverse("study_new"), _study_post(images, hypermodel="text"))
    assert response.status_code == 200
    assert "takes text" in page_text(response)
    assert not Study.objects.exists()


def _study_post(dataset, **fields) -> dict:
    return {"name": "s", "dataset": dataset.id, "hypermodel": "cnn", "tuner": "random",
            "objective_metric": "val_accuracy", "objective_direction": "auto", "max_trials": 2,
            "executions_per_trial": 1, "epochs": 2, "batch_size": 16, "patience": 2, "seed": 1, "queue": "cpu",
            "parallelism": 1, "precision": "float32", "jit_compile": "auto", "steps_per_execution": 1,
            "devices_per_trial": 1, "save": "1", **fields,
            "search_space": json.dumps([{"name": "filters", "type": "int", "min": 8, "max": 16, "step": 8,
                                         "sampling": "linear", "parent": None, "parent_values": []}])}


def test_compute_settings_are_validated_saved_and_shown(alice_client, acme, alice):
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    refused = alice_client.post(reverse("study_new"), _study_post(images, precision="mixed_float16"))
    assert refused.status_code == 200 and "needs a GPU" in page_text(refused)
    refused = alice_client.post(reverse("study_new"), _study_post(images, steps_per_execution=0))
    assert refused.status_code == 200 and not Study.objects.exists()

    saved = alice_client.post(reverse("study_new"), _study_post(
        images, queue="gpu", precision="mixed_float16", jit_compile="on", steps_per_execution=16,
        devices_per_trial=2))
    assert saved.status_code == 302
    study = Study.objects.get()
    assert (study.queue, study.precision, study.jit_compile, study.steps_per_execution,
            study.devices_per_trial) == ("gpu", "mixed_float16", "on", 16, 2)
    page = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    assert "2 devices per trial (batch 16 per replica)" in page and "mixed_float16" in page


def test_bundled_datasets_of_every_kind_can_be_added(alice_client, acme):
    for name, kind in (("digits_images", "image"), ("reviews", "text"), ("waves", "sequence")):
        response = alice_client.post(reverse("dataset_list"), {"bundled_name": name, "name": "", "val_fraction": 0.15,
                                                               "test_fraction": 0.15, "seed": 0})
        assert response.status_code == 302
        assert Dataset.objects.get(bundled_name=name).kind == kind
    listing = alice_client.get(reverse("dataset_list")).content.decode()
    assert "Images" in listing and "Text" in listing and "Sequences" in listing
