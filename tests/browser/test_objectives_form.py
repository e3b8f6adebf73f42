"""Several objectives in a real Chromium: the form takes them and the constraints as lines, the
Optuna tuners show the initial-random-trials field with the budget's default, and the study page
draws the Pareto front (Plotly) beside its table."""

import pytest

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_two_objective_study_from_the_form_and_its_front_drawn(live_server, page, acme, alice, screenshot):
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(f"{live_server.url}/studies/new/?dataset={dataset.id}")
    page.get_by_label("Study name").fill("accuracy vs size")
    page.locator("#id_tuner").select_option("optuna_tpe")
    page.locator("#id_objective_metric").select_option("val_accuracy")
    page.get_by_label("Max trials").fill("40")
    assert page.locator("#initial-random-field").is_visible()  # TPE starts with random trials too
    assert int(page.locator("#initial-random-default").inner_text()) <= 10  # at most a quarter of 40
    page.locator("#id_tuner").select_option("optuna_nsga2")
    assert not page.locator("#initial-random-field").is_visible()
    page.locator("#objectives-and-constraints summary").click()
    page.get_by_label("More objectives").fill("params min")
    page.get_by_label("Constraints").fill("params <= 2000")
    page.get_by_role("button", name="Save without starting").click()
    page.wait_for_url("**/studies/*/")
    study = Study.objects.get(name="accuracy vs size")
    assert study.extra_objectives == [{"metric": "params", "direction": "min"}]
    assert study.constraints == [{"metric": "params", "op": "<=", "value": 2000.0}]

    for number, (accuracy, params) in enumerate([(0.9, 1500), (0.8, 400), (0.85, 1800), (0.97, 5000)], start=1):
        Trial.objects.create(study=study, trial_id=str(number), number=number, status=Trial.Status.COMPLETED,
                             score=accuracy, metrics={"val_accuracy": accuracy, "params": params},
                             feasible=params <= 2000, hyperparameters={"units": number})
    page.reload()
    page.locator("#pareto-chart .main-svg").first.wait_for(timeout=15_000)  # drawn by Plotly
    assert page.locator("#pareto-empty").is_hidden()
    assert page.locator("#pareto-table tbody tr").count() == 2  # trials 1 and 2: 3 is beaten, 4 infeasible
    assert page.locator("#pareto-chart .legendtext", has_text="infeasible").count() == 1
    best = page.evaluate("document.getElementById('history-chart').data[1].y")
    assert best == [0.9, 0.9, 0.9, 0.9]  # trial 4's 0.97 breaks the constraint: never the best so far
    screenshot("pareto-front")
