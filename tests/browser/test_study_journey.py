"""A person logs in, uploads a CSV, defines a search space in the editor, starts the study
and watches it complete — in a real Chromium against a real worker."""

import csv

import pytest
from sklearn.datasets import load_iris

from experiments.models import Dataset, Study, Trial
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser, pytest.mark.worker]


def _iris_csv(path) -> None:
    iris = load_iris()
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sepal_length", "sepal_width", "petal_length", "petal_width", "species"])
        for features, label in zip(iris.data, iris.target, strict=True):
            writer.writerow([*features, iris.target_names[label]])




def test_a_study_defined_in_the_browser_runs_to_completion(
    live_server, page, screenshot, alice, start_worker, tmp_path
):
    start_worker()
    log_in(page, live_server, "alice", PASSWORD)

    # Upload a CSV with string labels.
    csv_path = tmp_path / "flowers.csv"
    _iris_csv(csv_path)
    page.goto(f"{live_server.url}/datasets/upload/")
    page.get_by_label("Name").fill("flowers")
    page.get_by_label("File").set_input_files(str(csv_path))
    page.get_by_label("Target column").fill("species")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url("**/datasets/*/")
    assert "150" in page.content() and "setosa" in page.content()
    screenshot("dataset")
    dataset = Dataset.objects.get(name="flowers")

    # Define the study and its search space in the editor.
    page.goto(f"{live_server.url}/studies/new/?dataset={dataset.id}")
    page.get_by_label("Study name").fill("flowers search")
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
    page.get_by_label("Epochs").fill("3")
    page.get_by_label("Objective metric").fill("val_accuracy")
    page.get_by_label("Batch size").fill("16")
    screenshot("editor")
    page.locator("#save-and-start").click()
    page.wait_for_url("**/studies/*/")

    study = Study.objects.get(name="flowers search")
    units_row = next(r for r in study.search_space if r["name"] == "units")
    assert units_row["max"] == 64
    assert any(r["name"] == "dropout_extra" and r["type"] == "fixed" for r in study.search_space)

    # The page refreshes itself while the study runs, until it says Completed.
    page.locator("#study-status", has_text="Completed").wait_for(timeout=240_000)
    screenshot("completed")
    assert page.locator("#trials-table tbody tr.trial-row").count() == 2
    assert Trial.objects.filter(study=study, status=Trial.Status.COMPLETED).count() == 2
    assert page.locator("#best-trial").is_visible()
    assert page.locator("#cancel-study").count() == 0  # the live part re-renders its buttons too
