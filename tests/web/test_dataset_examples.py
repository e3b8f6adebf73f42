"""An image dataset's page shows a few example images per class, drawn server-side from the
stored training split as one PNG strip per class, at a team-scoped URL, drawn once and then
read from disk."""

import io

import numpy as np
import pytest
from django.urls import reverse
from PIL import Image

from experiments.presentation import dataset_examples
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.datasets import dataset_create_bundled
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache(settings, tmp_path):
    settings.VAR_DIR = tmp_path  # every test draws its strips itself


@pytest.fixture
def digits(acme, alice):
    return dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")


def _training_split(dataset) -> tuple[np.ndarray, np.ndarray]:
    with np.load(io.BytesIO(artifact_read_bytes(artifact=dataset.arrays))) as npz:
        return npz["x_train"], npz["y_train"]


def test_the_image_dataset_page_shows_examples_per_class_instead_of_shape_rows(alice_client, digits):
    page = page_text(alice_client.get(reverse("dataset_detail", args=[digits.id])))
    grid = page.split('id="example-grid"', 1)[1].split("</div>", 1)[0]
    for label in range(10):
        url = reverse("dataset_examples", args=[digits.id, label])
        assert f'<figure class="class-examples" data-class="{label}">' in grid
        assert f'<img src="{url}" alt="Example images of class {label}"' in grid
    assert "<h2>Preview</h2>" not in page  # no more rows of "8×8×1"
    assert "The first 6 training images of each class." in page


def test_a_class_strip_is_a_png_of_its_first_training_images(alice_client, digits):
    response = alice_client.get(reverse("dataset_examples", args=[digits.id, 3]))
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert response["Cache-Control"] == "private, max-age=86400"
    strip = Image.open(io.BytesIO(response.content))
    assert strip.format == "PNG" and strip.size == (dataset_examples.strip_width(), dataset_examples.THUMBNAIL_SIDE)
    x, y = _training_split(digits)
    threes = x[y == 3][:6, :, :, 0]
    pixels = np.asarray(strip.convert("L"))
    scale = dataset_examples.THUMBNAIL_SIDE // 8
    for i, digit in enumerate(threes):  # each 8×8 digit scaled up with its pixels kept square
        left = i * (dataset_examples.THUMBNAIL_SIDE + dataset_examples.GAP)
        cell = pixels[:, left:left + dataset_examples.THUMBNAIL_SIDE]
        assert np.array_equal(cell, np.kron(digit, np.ones((scale, scale), dtype=np.uint8)))


def test_the_strips_are_drawn_once_and_then_read_from_disk(alice_client, digits, settings):
    first = alice_client.get(reverse("dataset_examples", args=[digits.id, 0])).content
    cached = dataset_examples._cache_dir(digits)
    assert sorted(p.name for p in cached.iterdir()) == sorted(f"{i}.png" for i in range(10))
    (cached / "1.png").write_bytes(b"drawn before")  # what is on disk is what is served
    assert alice_client.get(reverse("dataset_examples", args=[digits.id, 1])).content == b"drawn before"
    assert alice_client.get(reverse("dataset_examples", args=[digits.id, 0])).content == first


def test_another_teams_dataset_examples_are_not_found(client, charlie, digits):
    client.force_login(charlie)
    assert client.get(reverse("dataset_examples", args=[digits.id, 0])).status_code == 404
    assert client.get(reverse("dataset_detail", args=[digits.id])).status_code == 404


def test_no_examples_for_a_class_that_is_not_shown_or_a_dataset_without_images(alice_client, digits, acme_dataset):
    assert alice_client.get(reverse("dataset_examples", args=[digits.id, 10])).status_code == 404
    assert alice_client.get(reverse("dataset_examples", args=[acme_dataset.id, 0])).status_code == 404
    page = page_text(alice_client.get(reverse("dataset_detail", args=[acme_dataset.id])))
    assert "<h2>Preview</h2>" in page and "example-grid" not in page  # a table keeps its row preview
