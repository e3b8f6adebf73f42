"""Several objectives and constraints through the page and the API alike (one validation layer):
the form takes them as lines, the API as lists, bad ones are refused with the same message and
nothing is saved; the study page and the API show the same Pareto front, infeasible trials never
on it; a clone carries them; another team's front is a 404."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study, Trial
from experiments.services.studies import study_create
from tests.api.conftest import token_client
from tests.web.pages import page_text, shows
from tests.web.test_study_form import _form, _post

pytestmark = pytest.mark.django_db

TWO = {"tuner": "optuna_tpe", "extra_objectives": "params min", "constraints": "params <= 5000"}


def _api_body(dataset, **fields):
    body = {k: v for k, v in _form(dataset).items() if k not in ("start", "search_space")}
    return {**body, "search_space": json.loads(_form(dataset)["search_space"]), **fields}


def test_the_form_saves_several_objectives_and_constraints(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, button="save", **TWO))
    assert response.status_code == 302, page_text(response)[-2000:]
    study = Study.objects.get()
    assert study.extra_objectives == [{"metric": "params", "direction": "min"}]
    assert study.constraints == [{"metric": "params", "op": "<=", "value": 5000.0}]
    page = page_text(alice_client.get(response["Location"]))
    assert "maximise val_accuracy; minimise params (a Pareto front)" in page
    assert '<dd id="study-constraints">params &lt;= 5000</dd>' in page
    assert 'id="pareto-empty-note"' in page and 'id="pareto-chart"' in page


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"extra_objectives": "val_mae min"}, "extra_objectives", "val_mae is not reported by this hypermodel"),
    ({"extra_objectives": "params smallest"}, "extra_objectives", "say min or max for params"),
    ({"extra_objectives": "val_accuracy min"}, "extra_objectives", "Each objective must be a different metric"),
    ({"constraints": "params < 10"}, "constraints", "compare params with <= or >="),
    ({"constraints": "params <= many"}, "constraints", "the bound for params must be a finite number"),
    ({"tuner": "bayesian", "extra_objectives": "params min"}, "tuner",
     "Bayesian optimisation and Hyperband rank trials by one score"),
    ({"tuner": "random", "extra_objectives": "params min", "pruner": "median"}, "pruner",
     "compares trials by one objective"),
])
def test_bad_objectives_and_constraints_are_refused_by_page_and_api_alike(alice_client, alice, acme_dataset,
                                                                         fields, field, message):
    response = _post(alice_client, _form(acme_dataset, **fields))
    assert response.status_code == 200 and shows(response, message), page_text(response)[-3000:]
    api_fields = {k: v for k, v in fields.items()}
    for name in ("extra_objectives", "constraints"):
        if name in api_fields:  # the API's lists, from the page's lines
            api_fields[name] = [dict(zip(("metric", "direction") if name == "extra_objectives"
                                         else ("metric", "op", "value"), line.split(), strict=True))
                                for line in api_fields[name].splitlines()]
    answer = token_client(alice).post(reverse("api:study-list"), _api_body(acme_dataset, **api_fields), format="json")
    assert answer.status_code == 400, answer.content
    assert message.replace("&lt;", "<").replace("&gt;", ">") in json.dumps(answer.json())
    assert not Study.objects.exists()


def _trial(study, number, score, params, feasible=None):
    return Trial.objects.create(study=study, trial_id=str(number), number=number, status=Trial.Status.COMPLETED,
                                score=score, metrics={"val_accuracy": score, "params": params}, feasible=feasible,
                                hyperparameters={"units": number * 4})


@pytest.fixture
def two_objective_study(acme, alice, acme_dataset):
    study = study_create(team=acme, user=alice, dataset=acme_dataset, name="trade-off", hypermodel="dense",
                         search_space=json.loads(_form(acme_dataset)["search_space"]), tuner="optuna_nsga2",
                         objective_metric="val_accuracy", objective_direction="max",
                         extra_objectives=[{"metric": "params", "direction": "min"}],
                         constraints=[{"metric": "params", "op": "<=", "value": 9000}])
    _trial(study, 1, 0.90, 5000, True)
    _trial(study, 2, 0.80, 1000, True)
    _trial(study, 3, 0.85, 6000, True)   # beaten by trial 1
    _trial(study, 4, 0.99, 20000, False)  # the best accuracy, but infeasible
    _trial(study, 5, 0.95, 8000, True)
    return study


def test_the_page_and_the_api_show_the_same_front_without_infeasible_trials(alice_client, alice,
                                                                             two_objective_study):
    page = page_text(alice_client.get(reverse("study_detail", args=[two_objective_study.id])))
    table = page.split('id="pareto-table"', 1)[1].split("</table>", 1)[0]
    assert [int(n) for n in _data_trials(table)] == [5, 1, 2]  # best accuracy first
    assert "infeasible</span>" in page  # trial 4, in the trial table
    front = token_client(alice).get(reverse("api:study-pareto-front", args=[two_objective_study.id])).json()
    assert front["objectives"] == [{"metric": "val_accuracy", "direction": "max"},
                                   {"metric": "params", "direction": "min"}]
    assert [row["trial"]["number"] for row in front["front"]] == [5, 1, 2]
    assert [row["values"] for row in front["front"]] == [[0.95, 8000.0], [0.9, 5000.0], [0.8, 1000.0]]
    assert all(row["trial"]["feasible"] for row in front["front"])
    chart = alice_client.get(reverse("study_chart_data", args=[two_objective_study.id])).json()["pareto"]
    assert sorted(p["number"] for p in chart["points"] if p["front"]) == [1, 2, 5]
    assert [p["feasible"] for p in chart["points"] if p["number"] == 4] == [False]


def _data_trials(html: str) -> list[str]:
    return [part.split('"', 1)[0] for part in html.split('data-trial="')[1:]]


def test_the_best_trial_and_the_top_trials_are_never_infeasible(alice, two_objective_study):
    from experiments.selectors.trials import study_best_trial, study_top_trials

    assert study_best_trial(study=two_objective_study).number == 5  # not trial 4 (0.99, infeasible)
    assert [t.number for t in study_top_trials(study=two_objective_study, n=2)] == [5, 1]  # the front's first


def test_a_single_objective_study_has_no_front_and_another_teams_front_is_a_404(alice, charlie, acme_dataset,
                                                                                two_objective_study, acme):
    single = study_create(team=acme, user=alice, dataset=acme_dataset, name="one", hypermodel="dense",
                          search_space=json.loads(_form(acme_dataset)["search_space"]),
                          objective_metric="val_accuracy")
    answer = token_client(alice).get(reverse("api:study-pareto-front", args=[single.id]))
    assert answer.status_code == 404 and "This study has one objective" in answer.json()["detail"]
    assert token_client(charlie).get(reverse("api:study-pareto-front",
                                             args=[two_objective_study.id])).status_code == 404


def test_a_clone_carries_the_objectives_and_constraints(alice_client, alice, two_objective_study):
    page = page_text(alice_client.get(reverse("study_clone", args=[two_objective_study.id])))
    assert "params min</textarea>" in page and "params &lt;= 9000</textarea>" in page
    answer = token_client(alice).post(reverse("api:study-clone", args=[two_objective_study.id]), {}, format="json")
    assert answer.status_code == 201, answer.content
    copy = Study.objects.get(pk=answer.json()["id"])
    assert (copy.extra_objectives, copy.constraints) == (two_objective_study.extra_objectives,
                                                         two_objective_study.constraints)


def test_the_leaderboard_marks_models_from_the_front_with_their_other_objectives(alice_client, acme, alice,
                                                                                 two_objective_study):
    from experiments.models import TrainedModel

    for number, name in ((1, "on-front"), (3, "dominated")):
        trial = two_objective_study.trials.get(number=number)
        TrainedModel.objects.create(team=acme, dataset=two_objective_study.dataset, study=two_objective_study,
                                    trial=trial, name=name, version=1, method="retrain", seed=1, status="completed",
                                    test_metrics={"accuracy": trial.score}, val_metrics={"accuracy": trial.score})
    page = page_text(alice_client.get(reverse("leaderboard") + f"?dataset={two_objective_study.dataset_id}"))
    on_front = page.split('title="on-front v1"', 1)[1].split("</td>", 1)[0]
    dominated = page.split('title="dominated v1"', 1)[1].split("</td>", 1)[0]
    assert "Pareto front</span>" in on_front and "params 5000" in on_front
    assert "Pareto front" not in dominated and "params 6000" in dominated


def test_a_trial_page_shows_what_it_cost_apart_from_its_training_metrics(alice_client, two_objective_study):
    trial = Trial.objects.get(study=two_objective_study, number=2)
    trial.metrics = {**trial.metrics, "loss": 0.4, "device_seconds": 12.5, "seconds_per_epoch": 4.1667}
    trial.save(update_fields=["metrics"])
    page = page_text(alice_client.get(reverse("trial_detail", args=[two_objective_study.id, trial.id])))
    costs = page.split('id="trial-costs"', 1)[1].split("</table>", 1)[0]
    assert 'data-metric="params">1,000<' in costs and 'data-metric="device_seconds">12.5<' in costs
    assert 'data-metric="seconds_per_epoch">4.1667<' in costs
    metrics = page.split('id="trial-metrics"', 1)[1].split("</table>", 1)[0]
    assert "device_seconds" not in metrics and "params" not in metrics and ">accuracy<" in metrics
