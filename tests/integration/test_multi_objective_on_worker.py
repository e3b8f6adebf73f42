"""A two-objective study with constraints on a real worker: the trials report their parameter
count and a measured latency, those that break a constraint are marked infeasible, and the front
the study page shows is the one the API gives, non-dominated and without infeasible trials."""

import pytest
from django.urls import reverse

from experiments.models import Study
from experiments.services.datasets import dataset_create_bundled
from tests.api.conftest import token_client
from tests.conftest import wait_for
from tests.integration.helpers import started_study
from tests.web.pages import page_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_two_objective_study_on_a_worker_gives_one_front_to_the_page_and_the_api(acme, alice, alice_client,
                                                                                  start_worker):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    start_worker("w1")
    # The tiny hypermodel on iris has 8 × units + 3 parameters: 4 to 12 units keep it under 100.
    study = started_study(acme, alice, iris, name="trade-off", tuner="optuna_tpe", max_trials=6, epochs=2,
                          extra_objectives=[{"metric": "params", "direction": "min"}],
                          constraints=[{"metric": "params", "op": "<=", "value": 100},
                                       {"metric": "latency_ms", "op": "<=", "value": 10_000}])

    def ended():
        study.refresh_from_db()
        return study.status != Study.Status.RUNNING

    wait_for(ended, timeout=240, what="the two-objective study to finish")
    assert study.status == Study.Status.COMPLETED, study.message
    trials = list(study.trials.order_by("number"))
    assert len(trials) == 6
    for trial in trials:
        units = trial.hyperparameters["units"]
        assert trial.metrics["params"] == 8 * units + 3 and 0 < trial.metrics["latency_ms"] < 10_000
        assert trial.feasible is (units <= 12)
    api = token_client(alice).get(reverse("api:study-pareto-front", args=[study.id])).json()["front"]
    page = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    table = page.split('id="pareto-table"', 1)[1].split("</table>", 1)[0]
    shown = [int(part.split('"', 1)[0]) for part in table.split('data-trial="')[1:]]
    assert shown == [row["trial"]["number"] for row in api] and shown
    feasible = [t for t in trials if t.feasible]
    for row in api:
        accuracy, params = row["values"]
        assert row["trial"]["feasible"] is True
        assert not any(t.score >= accuracy and t.metrics["params"] <= params
                       and (t.score > accuracy or t.metrics["params"] < params) for t in feasible)
