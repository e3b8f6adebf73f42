""""Try it" in a real Chromium, more than once on one page load: the job's live part refreshes
itself every 2 s while it waits (no worker here), and a refresh must not take the place of the
box the next Predict answers into (it did: the live part inherited the form's hx-target and
its first refresh replaced #try-result, so a second Predict went nowhere)."""

import io

import pytest

from experiments.models import Artifact, ModelFile, PredictionJob
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.registry_rows import registrable

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def _iris_model(acme, alice):
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris study", hypermodel="dense")
    model = registrable(acme, alice, study, 1)
    artifact = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="m.keras", fileobj=io.BytesIO(b"PK"))
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS, artifact=artifact)
    return model


def test_try_it_shows_a_body_refused_before_the_view_inside_the_box(live_server, page, acme, alice, settings,
                                                                    screenshot):
    """htmx swaps only 2xx answers by itself: a 400 or 413 from experiments/middleware.py (a body
    too large, too many fields) left the box blank. Its message now takes the box's place, and
    the box still answers the next Predict."""
    model = _iris_model(acme, alice)
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/models/{model.id}/")

    page.locator("#try-rows").fill("5.1," * 800_000 + "0.2")  # 3.2 MB pasted: over the 2.5 MB of fields
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result #request-refused")
    assert "larger than 2.6 MB" in page.locator("#try-result").inner_text()

    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 1  # the box sends two: its CSRF token and the rows
    page.locator("#try-rows").fill("5.1,3.5,1.4,0.2")
    page.locator("#try-submit").click()
    page.wait_for_function("document.querySelector('#try-result').innerText.includes('too many fields')")
    assert "The request has too many fields (at most 1); send fewer." in page.locator("#try-result").inner_text()
    screenshot("refused-400")
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000

    page.locator("#try-rows").fill("1" * 140_000 + ",3.5,1.4,0.2")  # over the csv module's field limit
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result #try-error")
    assert "longer than 131,072 characters" in page.locator("#try-result").inner_text()
    assert not PredictionJob.objects.exists()

    page.locator("#try-rows").fill("5.1,3.5,1.4,0.2")
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result .prediction-live")
    assert PredictionJob.objects.count() == 1


def test_try_it_answers_every_predict_on_one_page_load(live_server, page, acme, alice, screenshot):
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris study", hypermodel="dense")
    model = registrable(acme, alice, study, 1)
    artifact = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="m.keras", fileobj=io.BytesIO(b"PK"))
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS, artifact=artifact)
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/models/{model.id}/")

    page.locator("#try-rows").fill("5.1,3.5,1.4,0.2")
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result .prediction-live")
    page.wait_for_timeout(2600)  # the live part has refreshed itself at least once
    assert page.locator("#try-result .prediction-live").count() == 1
    job = PredictionJob.objects.get()
    assert page.locator(f"#try-result #prediction-live-{job.pk}").count() == 1

    page.locator("#try-rows").fill("1,2")  # refused: the message takes the box's place
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result #try-error")
    assert "Row 2 has 2 values" in page.locator("#try-result").inner_text()

    page.locator("#try-rows").fill("6.3,2.9,5.6,1.8\n5.0,3.4,1.5,0.2")
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result .prediction-live")
    assert PredictionJob.objects.count() == 2
    page.wait_for_selector(f"#try-result #prediction-live-{PredictionJob.objects.order_by('-id').first().pk}")
    screenshot("second-try")


def test_try_it_results_take_the_boxs_full_width_with_fixed_decimal_probabilities(live_server, page, acme, alice,
                                                                                  screenshot):
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris study", hypermodel="dense")
    model = registrable(acme, alice, study, 1)
    artifact = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="m.keras", fileobj=io.BytesIO(b"PK"))
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS, artifact=artifact)
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/models/{model.id}/")
    page.locator("#try-rows").fill("5.1,3.5,1.4,0.2")
    page.locator("#try-submit").click()
    page.wait_for_selector("#try-result .prediction-live")
    # What a worker leaves (none runs here): the live part's next refresh shows the table.
    PredictionJob.objects.update(status="completed", rows_done=1, preview=[
        {"row": "1", "label": "setosa", "setosa": "0.9999854", "versicolor": "1.4580002e-05", "virginica": "3e-09"}])
    table = page.wait_for_selector("#try-result #prediction-preview")
    cells = page.locator("#try-result #prediction-preview tbody td").all_inner_texts()
    assert cells == ["1", "setosa", ">0.9999", "<0.0001", "<0.0001"]
    card = page.locator("#model-predictions").evaluate(
        "(c) => { const s = getComputedStyle(c); "
        "return c.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight); }")
    # The result box spans the card (its table fills the live part inside it), not one column.
    assert page.locator("#try-result").bounding_box()["width"] >= card - 2
    assert table.bounding_box()["width"] >= 0.95 * card, (table.bounding_box(), card)
    # The forms stay side by side above it.
    try_form, batch = (page.locator(s).bounding_box() for s in ("#try-form", "#batch-predict-form"))
    assert try_form["y"] == batch["y"] and try_form["x"] + try_form["width"] <= batch["x"]
    screenshot("full-width")
