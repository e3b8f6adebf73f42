"""The whole journey in a real Chromium against a real worker (the docs' getting-started pictures:
`make docs-images`), on what `make run` seeds (its demo team, login and bundled datasets): log in
as the demo user, upload a CSV, define a search space in the editor on the bundled iris, start the
study and watch it update live (charts included), retrain the top models, build an ensemble, find
it on the leaderboard and download a model. A user of another team then sees none of it."""

import csv
import hashlib

import pytest
from django.core.management import call_command
from django.utils import timezone
from sklearn.datasets import load_iris

from experiments.management.commands.seed_demo import CONFIRM_FLAG, DEMO_PASSWORD, DEMO_TEAM, DEMO_USERNAME
from experiments.models import Dataset, Study, TrainedModel, Trial
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.worker]


def _iris_csv(path) -> None:
    iris = load_iris()
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"])
        for features, label in zip(iris.data, iris.target, strict=True):
            writer.writerow([*features, iris.target_names[label]])




def test_the_whole_journey_from_upload_to_a_downloaded_ensemble(
    live_server, page, browser, screenshot, charlie, start_worker, tmp_path
):
    call_command("seed_demo", CONFIRM_FLAG)  # what `make run` seeds: the pictures show its data
    start_worker()
    log_in(page, live_server, DEMO_USERNAME, DEMO_PASSWORD)

    # Upload a CSV with string labels.
    csv_path = tmp_path / "zanzibar.csv"
    _iris_csv(csv_path)
    page.goto(f"{live_server.url}/datasets/upload/")
    page.get_by_label("Name").fill("zanzibar")
    page.get_by_label("File").set_input_files(str(csv_path))
    page.get_by_label("Target column").fill("species")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/datasets/*/")
    assert "150" in page.content() and "setosa" in page.content()
    screenshot("dataset", docs="dataset")
    assert Dataset.objects.filter(name="zanzibar", team__name=DEMO_TEAM).exists()

    # Define the study and its search space in the editor, on the bundled iris the demo team was seeded with.
    dataset = Dataset.objects.get(team__name=DEMO_TEAM, bundled_name="iris")
    page.goto(f"{live_server.url}/studies/new/?dataset={dataset.id}")
    page.get_by_label("Study name").fill("iris search")
    page.select_option("#id_hypermodel", "dense")
    page.locator("#hp-reset").click()
    rows = page.locator(".hp-row")
    assert rows.count() >= 5
    # Keep the space small: fix the optimizer, narrow the units, add a row of our own.
    units = page.locator('.hp-row[data-index="1"]')
    units_name = units.locator('[data-field="name"]')
    assert units_name.input_value() == "units"
    units.locator('[data-field="max"]').fill("64")
    page.locator("#hp-add").click()
    new_row = page.locator(".hp-row").last
    new_row.locator('[data-field="name"]').fill("dropout_extra")
    new_row.locator('[data-field="type"]').select_option("fixed")
    new_row.locator('[data-field="value"]').fill("0")
    page.get_by_label("Max trials").fill("2")
    page.get_by_label("Epochs", exact=True).fill("3")
    page.get_by_label("Objective metric").select_option("val_accuracy")
    page.get_by_label("Batch size").fill("16")
    page.locator(".hp-row").first.evaluate("row => row.scrollIntoView({block: 'center'})")
    screenshot("editor", docs="new-study")
    page.locator("#save-and-start").click()
    page.wait_for_url("**/studies/*/")

    study = Study.objects.get(name="iris search")
    units_row = next(r for r in study.search_space if r["name"] == "units")
    assert units_row["max"] == 64
    assert any(r["name"] == "dropout_extra" and r["type"] == "fixed" for r in study.search_space)

    # The page refreshes itself while the study runs, until it says Completed.
    page.locator("#study-status", has_text="Completed").wait_for(timeout=240_000)
    screenshot("completed", docs="study")
    assert page.locator("#trials-table tbody tr.trial-row").count() == 2
    assert Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).count() == 2
    assert page.locator("#best-trial").is_visible()
    assert page.locator("#cancel-study").count() == 0  # the live part re-renders its buttons too

    # The charts are drawn from the installed Plotly: history, curves, parallel coordinates.
    page.locator("#history-chart .main-svg").first.wait_for()
    # The charts follow the live updates: the history ends with both finished trials.
    page.wait_for_function("document.querySelectorAll('#history-chart .scatterlayer .trace:first-child .point')"
                           ".length === 2")
    page.locator("#curves-chart .main-svg").first.wait_for()
    page.locator("#parallel-chart .main-svg, #parallel-empty:not([hidden])").first.wait_for()
    page.locator("#curves-chart").scroll_into_view_if_needed()
    screenshot("charts", docs="study-charts")

    # Retrain the two best trials (a small epoch cap keeps the test quick).
    # The finished study's last live update brought the form in, already open.
    assert page.locator("#study-models details").get_attribute("open") is not None
    form = page.locator("#model-request-form")
    form.get_by_label("How many of the best trials").fill("2")
    form.get_by_label("Epoch cap for best-epoch detection").fill("5")
    form.get_by_label("Model name").fill("zanzibar")
    form.locator("#request-models").click()
    page.wait_for_url("**/models/")
    assert page.locator("tr.model-row").count() == 2
    # Two configurations, two names: the name given, suffixed with each trial's id.
    models = list(TrainedModel.objects.filter(name__startswith="zanzibar-trial-").order_by("id"))
    assert len(models) == 2 and {m.version for m in models} == {1}
    for model in models:
        page.goto(f"{live_server.url}/models/{model.id}/")
        page.locator("#model-status", has_text="Completed").wait_for(timeout=300_000)
    assert page.locator("#model-metrics").is_visible()
    # The learning curves of the real retrain are drawn, per phase.
    page.wait_for_function("document.getElementById('learning-curves-chart').data?.length > 0")
    screenshot("model", docs="model")

    # Build a Nelder–Mead ensemble of the two from the models page.
    page.goto(f"{live_server.url}/models/")
    page.locator("#new-ensemble").click()
    for model in models:
        page.get_by_label(str(model)).check()
    page.get_by_label("Name").fill("zanzibar-blend")
    clicked = timezone.now()  # the worker is idle: both retrains are done
    page.locator("#build-ensemble").click()
    page.wait_for_url("**/models/*/")
    blend = wait_for(lambda: TrainedModel.objects.filter(name="zanzibar-blend", started__isnull=False).first(),
                     timeout=30, interval=0.05, what="the ensemble to be claimed")
    waited = (blend.started - clicked).total_seconds()
    assert waited <= 3, f"the ensemble was claimed {waited:.1f} s after the click"
    page.locator("#model-status", has_text="Completed").wait_for(timeout=300_000)
    page.locator("#weights-chart .main-svg").first.wait_for()
    assert page.locator("#ensemble-comparison").is_visible()
    assert "never trained on the validation split" in page.content()
    screenshot("ensemble", docs="ensemble")

    # The leaderboard ranks it beside the single models; download its .keras file.
    page.get_by_role("link", name="Leaderboard").click()
    ranked = page.locator("tr.leaderboard-row")
    assert ranked.count() == 3
    assert page.locator('tr.leaderboard-row[data-model="zanzibar-blend-v1"]').is_visible()
    screenshot("leaderboard", docs="leaderboard")
    page.locator('tr.leaderboard-row[data-model="zanzibar-blend-v1"] a').first.click()
    with page.expect_download() as download:
        page.locator("#downloads a", has_text="Keras (.keras)").click()
    path = tmp_path / "downloaded.keras"
    download.value.save_as(path)
    blend = TrainedModel.objects.get(name="zanzibar-blend")
    artifact = blend.files.get(format="keras").artifact
    assert hashlib.sha256(path.read_bytes()).hexdigest() == artifact.sha256

    # Readable on a phone: nothing wider than the screen but the scrolling tables.
    page.set_viewport_size({"width": 390, "height": 800})
    for url in (f"/studies/{study.id}/", "/leaderboard/", "/"):
        page.goto(live_server.url + url)
        assert page.evaluate("document.documentElement.scrollWidth") <= 400, url
    screenshot("phone")

    # Charlie, of another team, sees none of it.
    other = browser.new_context(viewport={"width": 1280, "height": 800})
    charlie_page = other.new_page()
    log_in(charlie_page, live_server, "charlie", PASSWORD)
    for url in ("/", "/studies/", "/models/", "/leaderboard/", "/datasets/"):
        charlie_page.goto(live_server.url + url)
        text = charlie_page.content()
        assert "zanzibar" not in text, url
    response = charlie_page.goto(f"{live_server.url}/models/{blend.id}/")
    assert response.status == 404
    other.close()
