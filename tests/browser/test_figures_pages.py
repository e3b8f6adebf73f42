"""Figures nobody misreads, in a real Chromium (rows made through the ORM, no worker): the
owner changes the team's ranking metric on the leaderboard and the dashboard agrees; a study
whose trials all stopped at the last epoch says so; an ensemble one member carries says so;
the model page draws its learning curves."""

import pytest

from experiments.models import Dataset, Study
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_ensemble, finished_model, finished_trial

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def _first_row(page) -> str:
    return page.locator("#leaderboard-table tbody tr").first.get_attribute("data-model")


def test_the_owner_changes_the_ranking_metric_and_the_dashboard_agrees(live_server, page, acme, alice, screenshot):
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    study = saved_study(acme, alice, wine, name="wine study", hypermodel="dense")
    trial = finished_trial(study, 1)
    for version, test in [(1, {"accuracy": 1.0, "loss": 0.09, "mae": 0.3}), (2, {"accuracy": 1.0, "loss": 0.02,
                                                                                 "mae": 0.5}),
                          (3, {"accuracy": 0.97, "loss": 0.01, "mae": 0.1})]:
        finished_model(acme, alice, study, trial, name="wine", version=version, test=test)
    log_in(page, live_server, "alice", PASSWORD)

    assert page.locator("#best-models .best-model").first.get_attribute("data-model") == "wine-v2"
    page.goto(f"{live_server.url}/leaderboard/")
    assert _first_row(page) == "wine-v2"  # accuracy ties at 1.0: the lower test loss first
    assert "ties: the lower test loss" in page.locator("#ranking-rule").inner_text()

    page.get_by_label("Rank by (for the whole team)").select_option("mae")
    page.locator("#save-ranking").click()
    page.wait_for_load_state()
    assert "The team now ranks models by test mae." in page.content()
    assert _first_row(page) == "wine-v3"
    assert "Ranked by test mae, lower is better" in page.locator("#ranking-rule").inner_text()
    screenshot("leaderboard")

    page.goto(f"{live_server.url}/")
    best = page.locator("#best-models .best-model").first
    assert best.get_attribute("data-model") == "wine-v3" and "test mae 0.1000" in best.inner_text()
    screenshot("dashboard")


def test_warnings_and_the_learning_curves_show(live_server, page, acme, alice, screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    study = saved_study(acme, alice, iris, name="short study", hypermodel="dense", epochs=6)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)
    trials = [finished_trial(study, number, score=0.8 + number / 100) for number in (1, 2, 3)]
    models = [finished_model(acme, alice, study, trials[i], name="short", version=i + 1, best_epoch=40, phases=True)
              for i in range(3)]
    ensemble = finished_ensemble(acme, alice, iris, models, [1.0, 0.0, 0.0], name="lopsided")
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/{study.id}/")
    warning = page.locator("#study-still-improving")
    assert warning.is_visible()
    assert "All 3 completed trials had their best epoch at the last epoch (6)" in warning.inner_text()
    assert page.locator("#trials-table .still-improving").count() == 3
    screenshot("study")

    page.goto(f"{live_server.url}/models/{ensemble.id}/")
    assert "Effectively a single model: short v1 carries at least 99% of the weight." in page.locator(
        ".model-warning").first.inner_text()
    page.wait_for_function("document.getElementById('weights-chart').data?.length > 0")
    screenshot("ensemble")

    page.goto(f"{live_server.url}/models/{models[0].id}/")
    page.wait_for_function("document.getElementById('learning-curves-chart').data?.length > 0")
    traces = page.evaluate("document.getElementById('learning-curves-chart').data.map((t) => t.name)")
    assert "Best-epoch detection (train, validated): validation" in traces
    assert "Retraining (train+validation): train" in traces
    assert page.locator("#learning-curves-chart .main-svg").first.is_visible()
    assert not page.locator(".epochs-table").first.is_visible()  # folded away until asked for
    page.locator("#epochs summary").click()
    assert page.locator(".epochs-table").first.is_visible()
    screenshot("model")


def test_the_objective_metric_is_picked_from_what_the_hypermodel_reports(
        live_server, page, acme, alice, settings, screenshot):
    settings.HYPERMODELS = ["tiny=tests.fixtures.hypermodels:build_tiny"]
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    prices = dataset_create_bundled(team=acme, user=alice, bundled_name="wine", name="prices")
    Dataset.objects.filter(pk=prices.pk).update(task=Dataset.Task.REGRESSION)
    log_in(page, live_server, "alice", PASSWORD)

    page.goto(f"{live_server.url}/studies/new/?dataset={iris.id}")
    metric = page.locator("#id_objective_metric")

    def options():
        return page.locator("#id_objective_metric option").all_inner_texts()

    assert options() == ["val_accuracy", "val_loss", "accuracy", "loss"]
    metric.select_option("val_accuracy")
    assert page.locator("#direction-inferred").inner_text() == "val_accuracy will be maximised."

    page.locator("#id_dataset").select_option(str(prices.id))  # regression: no accuracy to optimise
    assert options() == ["val_loss", "val_mae", "loss", "mae"]
    assert metric.input_value() == "val_loss"
    assert page.locator("#direction-inferred").inner_text() == "val_loss will be minimised."

    page.locator("#id_hypermodel").select_option("tiny")  # a team hypermodel may report anything
    assert page.locator("#id_objective_metric").evaluate("e => e.tagName") == "INPUT"
    page.locator("#id_objective_metric").fill("val_r2")
    assert page.locator("#direction-inferred").inner_text() == "val_r2 will be maximised."
    screenshot("team-hypermodel")
    page.locator("#id_hypermodel").select_option("dense")
    assert page.locator("#id_objective_metric").evaluate("e => e.tagName") == "SELECT" and options()[1] == "val_mae"
