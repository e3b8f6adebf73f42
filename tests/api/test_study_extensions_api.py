"""Extending an ended study through the page, the API and the CLI alike (one service, the same messages), and cost
objectives (device_seconds, seconds_per_epoch) taken by the form and the API like any other objective."""

import pytest
from django.urls import reverse

from experiments.models import Study
from tests.api.conftest import token_client
from tests.web.pages import page_text, shows
from tests.web.recipe_rows import study_with_trials
from tests.web.test_objectives_pages import _api_body
from tests.web.test_study_form import _form, _post

pytestmark = pytest.mark.django_db

COSTS = {"tuner": "optuna_tpe", "extra_objectives": "device_seconds min", "constraints": "seconds_per_epoch <= 2"}


@pytest.fixture
def ended(acme, alice, acme_dataset) -> Study:
    study = study_with_trials(acme, alice, acme_dataset, "ended search", "dense", [0.3, 0.2, 0.25])
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, max_trials=3, tuner="random")
    study.refresh_from_db()
    return study


def test_the_page_extends_an_ended_study_and_shows_its_segments(alice_client, ended):
    page = page_text(alice_client.get(reverse("study_detail", args=[ended.id])))
    assert "Extend this study" in page
    response = alice_client.post(reverse("study_extend", args=[ended.id]),
                                 {"max_trials": 6, "epochs": ended.epochs, "tuner": "optuna_tpe"})
    assert response.status_code == 302
    ended.refresh_from_db()
    assert (ended.status, ended.max_trials, ended.tuner) == ("running", 6, "optuna_tpe")
    page = page_text(alice_client.get(response["Location"]))
    assert "Study extended" in page and "From trial 4: Optuna TPE, up to 6 trials" in page
    assert "From trial 1: Random search, up to 3 trials" in page and "extended by alice" in page


def test_the_page_and_the_api_refuse_a_bad_extension_alike_and_change_nothing(alice_client, alice, ended):
    message = "3 trials have run: raise max trials above 3 to run more."
    response = alice_client.post(reverse("study_extend", args=[ended.id]),
                                 {"max_trials": 3, "epochs": ended.epochs, "tuner": "random"}, follow=True)
    assert shows(response, message)
    response = token_client(alice).post(f"/api/v1/studies/{ended.id}/extend/", {"max_trials": 3}, format="json")
    assert response.status_code == 400 and response.json()["errors"]["max_trials"] == [message]
    response = token_client(alice).post(f"/api/v1/studies/{ended.id}/extend/", {"epochs": 0}, format="json")
    assert response.status_code == 400 and "epochs" in response.json()["errors"]
    ended.refresh_from_db()
    assert (ended.status, ended.max_trials, ended.segments) == ("completed", 3, [])


def test_the_api_extends_names_the_segments_and_refuses_a_running_study(alice, ended):
    api = token_client(alice)
    response = api.post(f"/api/v1/studies/{ended.id}/extend/", {"max_trials": 5, "epochs": 4, "tuner": "hyperband_tpe"},
                        format="json")
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["status"] == "running" and body["tuner"] == "hyperband_tpe"
    assert [s["first_trial"] for s in body["segments"]] == [1, 4]
    again = api.post(f"/api/v1/studies/{ended.id}/extend/", {"max_trials": 9}, format="json")
    assert again.status_code == 409 and "Only a completed, cancelled or failed study" in again.json()["detail"]
    assert api.post(f"/api/v1/studies/{ended.id}/extend/", {"max_trials": 9, "colour": "red"},
                    format="json").status_code == 400


def test_another_teams_study_is_not_found_for_extension(charlie, ended):
    response = token_client(charlie).post(f"/api/v1/studies/{ended.id}/extend/", {"max_trials": 9}, format="json")
    assert response.status_code == 404


def test_cost_objectives_and_constraints_are_taken_by_the_form_and_the_api(alice_client, alice, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, button="save", **COSTS))
    assert response.status_code == 302, page_text(response)[-2000:]
    study = Study.objects.get()
    assert study.extra_objectives == [{"metric": "device_seconds", "direction": "min"}]
    assert study.constraints == [{"metric": "seconds_per_epoch", "op": "<=", "value": 2.0}]
    body = _api_body(acme_dataset, name="costs by api", tuner="optuna_tpe",
                     extra_objectives=[{"metric": "seconds_per_epoch", "direction": "min"}],
                     constraints=[{"metric": "device_seconds", "op": "<=", "value": 120}])
    response = token_client(alice).post("/api/v1/studies/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["constraints"] == [{"metric": "device_seconds", "op": "<=", "value": 120.0}]


def test_a_pareto_pruner_on_cost_objectives_alone_is_refused_with_the_reason(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, pruner="pareto", **COSTS))
    assert response.status_code == 200 and shows(response, "is measured when training ends")
    assert not Study.objects.exists()
