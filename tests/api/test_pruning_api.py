"""Pruning through the API: settings in, the pruned state and what pruning saved out, and the
trials filter."""

import pytest

from experiments.models import Study, TrainedModel, Trial
from tests.api.test_resources import _study_body
from tests.web.pruning_rows import seed_pruning_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def pruning_study(acme_study):
    return seed_pruning_study(acme_study)


def test_a_study_is_created_with_a_pruner_and_shows_its_settings(alice_api, acme_dataset):
    body = _study_body(acme_dataset, pruner="successive_halving", pruning_min_epochs=2, pruning_reduction_factor=2)
    response = alice_api.post("/api/v1/studies/", body, format="json")
    assert response.status_code == 201, response.json()
    study = response.json()
    assert (study["pruner"], study["pruning_min_epochs"], study["pruning_reduction_factor"]) == (
        "successive_halving", 2, 2)
    assert study["pruning_startup_trials"] == 0  # a rung pruner's default: it judges from the first trials on
    assert study["pruning_saved"] == {"pruned": 0, "epochs": 0, "device_epochs": 0, "devices": 1,
                                      "unit": "CPU-epochs"}


def test_a_pruner_with_hyperband_is_refused_with_the_pages_message(alice_api, acme_dataset):
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, tuner="hyperband", pruner="median"),
                              format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "pruner" and "Hyperband already stops" in response.json()["detail"]
    assert not Study.objects.exists()


def test_trials_filter_by_the_pruned_state_and_show_the_decision(alice_api, pruning_study):
    url = f"/api/v1/studies/{pruning_study.id}/trials/"
    pruned = alice_api.get(url + "?status=pruned").json()
    assert pruned["count"] == 2
    assert {t["number"] for t in pruned["results"]} == {3, 4}
    assert {t["epochs_trained"] for t in pruned["results"]} == {2, 3}
    assert pruned["results"][0]["pruning"]["pruner"] == "median"
    assert alice_api.get(url + "?status=completed").json()["count"] == 2
    refused = alice_api.get(url + "?status=halted")
    assert refused.status_code == 400 and "pruned" in refused.json()["detail"]


def test_the_study_reports_pruned_trials_and_the_epochs_saved(alice_api, pruning_study):
    for url in (f"/api/v1/studies/{pruning_study.id}/", "/api/v1/studies/"):
        body = alice_api.get(url).json()
        study = body if "id" in body else body["results"][0]
        assert study["progress"]["pruned"] == 2 and study["progress"]["completed"] == 2
        assert study["pruning_saved"]["device_epochs"] == 15


def test_models_from_the_top_trials_include_pruned_ones_only_when_asked(alice_api, pruning_study):
    url = f"/api/v1/studies/{pruning_study.id}/models/"
    assert alice_api.post(url, {"top_n": 3, "method": "retrain"}, format="json").status_code == 202
    assert {m.trial.number for m in TrainedModel.objects.all()} == {1, 2}
    response = alice_api.post(url, {"top_n": 3, "method": "retrain", "include_pruned": True}, format="json")
    assert response.status_code == 202
    assert {m["trial"] for m in response.json()["models"]} == set(
        Trial.objects.filter(study=pruning_study, number__in=[1, 2, 4]).values_list("pk", flat=True))
