"""An ensemble recipe in a real Chromium: fill the form, watch the live preview say who would
be picked today (htmx), save, and land on the recipe's page with its rule in words."""

import pytest

from experiments.models import EnsembleRecipe
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.web.recipe_rows import study_with_trials

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_editor_makes_a_recipe_with_the_live_preview(live_server, page, acme, alice, screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    dense = study_with_trials(acme, alice, iris, "dense search", "dense", [0.30, 0.31, 0.40])
    tiny = study_with_trials(acme, alice, iris, "tiny search", "tiny", [0.35])
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/recipes/")
    page.locator("#new-recipe").click()
    page.locator("#id_name").fill("iris-mix")
    page.locator("#id_dataset").select_option(str(iris.id))
    page.locator("#id_source_studies").select_option([str(dense.id)])
    page.wait_for_selector("#preview-table tr.candidate")
    assert "Today the rule picks 1 member" in page.locator("#recipe-preview").inner_text()
    page.locator("#id_source_studies").select_option([str(dense.id), str(tiny.id)])
    page.wait_for_selector('#preview-table tr.candidate[data-trial]:has-text("tiny search")')
    preview = page.locator("#recipe-preview").inner_text()
    assert "hypermodel dense already has 1" in preview and "Today the rule picks" not in preview
    assert page.locator("#preview-table tr.picked").count() == 2
    screenshot("recipe-form")

    # A body refused before the view (a NUL pasted in a field): its message takes the preview's
    # place (htmx swaps no 400 by itself, and logged an error), and the next change brings it back.
    errors = []
    page.on("console", lambda message: errors.append(message.text) if "htmx" in message.text.lower()
            or "Response Status Error" in message.text else None)
    page.locator("#id_name").fill("iris\x00mix")
    page.locator("#id_top_k").fill("2")
    page.locator("#id_top_k").dispatch_event("change")
    page.wait_for_selector("#recipe-preview-box #request-refused")
    assert "NUL character" in page.locator("#recipe-preview-box").inner_text() and not errors
    page.locator("#id_name").fill("iris-mix")
    page.locator("#id_top_k").fill("3")
    page.locator("#id_top_k").dispatch_event("change")
    page.wait_for_selector("#recipe-preview-box #preview-table tr.picked")
    assert page.locator("#preview-table tr.picked").count() == 2 and not errors

    page.locator("#save-recipe").click()
    page.wait_for_selector("#rule-words")
    assert "Saved the recipe iris-mix." in page.locator(".flash-success").inner_text()
    assert "at most 1 per hypermodel" in page.locator("#rule-words").inner_text()
    assert EnsembleRecipe.objects.get().name == "iris-mix"
