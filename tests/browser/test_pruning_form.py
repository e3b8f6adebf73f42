"""The new-study form's pruning section in a real Chromium: only the settings of the chosen
pruner are shown (and sent), Hyperband says it needs none, and the study saved keeps them."""

import pytest

from experiments.models import Study
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
SETTINGS = ["startup_trials", "warmup_epochs", "min_trials", "percentile", "min_epochs", "reduction_factor"]


def visible(page) -> list[str]:
    return [name for name in SETTINGS if page.locator(f"#id_pruning_{name}").is_visible()]


def test_the_form_shows_the_settings_of_the_chosen_pruner_and_saves_them(live_server, page, acme, alice,
                                                                          screenshot):
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/studies/new/?dataset={dataset.id}")
    pruner = page.locator("#id_pruner")
    assert pruner.input_value() == "none" and visible(page) == []

    pruner.select_option("percentile")
    assert visible(page) == ["startup_trials", "warmup_epochs", "min_trials", "percentile"]
    assert "best P %" in page.locator("#pruner-explained").inner_text()
    startup = page.locator("#id_pruning_startup_trials")
    assert startup.input_value() == "5"
    pruner.select_option("successive_halving")
    assert visible(page) == ["startup_trials", "min_trials", "min_epochs", "reduction_factor"]
    assert startup.input_value() == "0"  # a rung pruner's own default: it judges from the first trials on
    pruner.select_option("median")
    assert startup.input_value() == "5"
    startup.fill("3")  # typed by the user: kept whichever pruner comes next
    pruner.select_option("successive_halving")
    assert startup.input_value() == "3"

    page.locator("#id_tuner").select_option("hyperband")
    assert "Hyperband already stops weak trials early" in page.locator("#pruner-explained").inner_text()
    page.locator("#id_tuner").select_option("random")

    page.locator("#id_pruning_reduction_factor").fill("2")
    page.get_by_label("Study name").fill("halving")
    screenshot("successive-halving")
    page.get_by_role("button", name="Save without starting").click()
    page.wait_for_url("**/studies/*/")
    study = Study.objects.get(name="halving")
    assert (study.pruner, study.pruning_reduction_factor, study.pruning_percentile, study.pruning_startup_trials) == (
        "successive_halving", 2, 25.0, 3)
    assert page.locator("#study-pruning").inner_text().startswith("Successive halving (ASHA): rungs at epochs 1 × 2^k")
