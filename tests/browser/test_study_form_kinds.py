"""The new-study form in a real Chromium: the hypermodels that do not take the chosen
dataset's kind are greyed out with the reason, switching dataset moves to a hypermodel that
fits and loads its default space, and an edited space is never overwritten."""

import json

import pytest

from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def _space_names(page) -> list[str]:
    return [row["name"] for row in json.loads(page.locator("#id_search_space").input_value())]


def test_the_form_offers_the_hypermodels_that_fit_and_loads_their_space(live_server, page, acme, alice, screenshot):
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    texts = dataset_create_bundled(team=acme, user=alice, bundled_name="reviews")
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/new/?dataset={images.id}")
    hypermodel = page.locator("#id_hypermodel")
    assert hypermodel.input_value() == "cnn"
    assert page.locator('#id_hypermodel option[value="text"]').is_disabled()
    assert not page.locator('#id_hypermodel option[value="resnet"]').is_disabled()
    assert "not offered: text (takes text)" in page.locator("#hypermodel-fit").inner_text()
    assert "filters" in _space_names(page)
    # Options are short names; the chosen one's description is shown under the choice.
    assert hypermodel.locator("option").all_inner_texts()[:2] == ["dense", "cnn"]
    assert page.locator("#hypermodel-description").inner_text().startswith("Convolutional network for images")
    screenshot("images")

    # A text dataset: the image hypermodel is no longer allowed; the form moves to `text`
    # and brings its default space, since the person has not edited it.
    page.locator("#id_dataset").select_option(str(texts.id))
    assert hypermodel.input_value() == "text"
    assert page.locator("#hypermodel-description").inner_text().startswith("Text classifier/regressor")
    assert page.locator('#id_hypermodel option[value="cnn"]').is_disabled()
    page.wait_for_function("document.getElementById('id_search_space').value.includes('max_tokens')")
    assert "encoder" in _space_names(page)

    # Once edited, switching hypermodel keeps the person's space.
    page.locator("#hp-add").click()
    page.locator('.hp-row').last.locator('[data-field="name"]').fill("my_extra")
    page.locator("#id_dataset").select_option(str(images.id))
    assert hypermodel.input_value() == "cnn"
    assert "my_extra" in page.locator("#id_search_space").input_value()

    # The compute section is on the form, with the batch size said to be per replica.
    assert page.get_by_label("Precision").is_visible()
    assert "per replica" in page.locator("label[for=id_batch_size]").inner_text()
