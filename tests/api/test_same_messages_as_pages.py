"""The API refuses what the pages refuse, with the same words: both bind the pages' forms (and
the bounds of experiments/tuning/bounds.py). Seeds that used to pass the API and fail on the worker
(-1, 2**40, 2**62), names the pages refuse, and names sent as lists."""

import pytest
from django.urls import reverse

from experiments.models import Dataset, Study, TrainedModel
from tests.integration.helpers import TINY_SPACE
from tests.web.figures_rows import finished_model, finished_trial
from tests.web.pages import shows

pytestmark = pytest.mark.django_db


@pytest.fixture
def members(acme, alice, acme_study):
    a = finished_model(acme, alice, acme_study, finished_trial(acme_study, 1, epochs=1), name="a")
    b = finished_model(acme, alice, acme_study, finished_trial(acme_study, 2, epochs=1), name="b")
    return [f"model:{a.id}", f"model:{b.id}"]


def _study(dataset, **fields):
    return {"name": "s", "dataset": dataset.id, "hypermodel": "dense", "search_space": TINY_SPACE, "tuner": "random",
            "objective_metric": "val_accuracy", "objective_direction": "auto", "max_trials": 5,
            "executions_per_trial": 1, "epochs": 4, "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu",
            "parallelism": 1, **fields}


def _study_page_form(dataset, **fields):
    import json

    return {**_study(dataset, **fields), "search_space": json.dumps(TINY_SPACE)}


SEEDS = [-1, 2**40, 2**62]


@pytest.mark.parametrize("seed", SEEDS)
def test_an_ensemble_seed_out_of_range_is_refused_alike(alice_client, alice_api, members, seed):
    before = TrainedModel.objects.count()
    api = alice_api.post("/api/v1/ensembles/", {"members": members, "method": "mean", "seed": seed}, format="json")
    page = alice_client.post(reverse("ensemble_new"), {"members": members, "method": "mean", "seed": seed})
    assert api.status_code == 400 and api.json()["field"] == "seed"
    message = api.json()["errors"]["seed"][0]
    assert message == "Seed must be a whole number from 0 to 2,147,483,647."
    assert shows(page, message)
    assert TrainedModel.objects.count() == before


@pytest.mark.parametrize(("name", "expected"), [
    ("Not A Slug", "may hold only lower-case letters, digits, '-' and '_'"),
    ("e" * 300, "at most 80 characters"),
])
def test_an_ensemble_name_is_refused_alike(alice_client, alice_api, members, name, expected):
    api = alice_api.post("/api/v1/ensembles/", {"members": members, "method": "mean", "name": name}, format="json")
    page = alice_client.post(reverse("ensemble_new"), {"members": members, "method": "mean", "name": name})
    message = api.json()["errors"]["name"][0]
    assert expected in message and shows(page, message)


@pytest.mark.parametrize(("field", "value"), [("seed", 2**40), ("seed", -1), ("name", "two\nlines"),
                                              ("max_trials", 0), ("batch_size", 10**9)])
def test_a_study_field_is_refused_alike(alice_client, alice_api, acme_dataset, field, value):
    before = Study.objects.count()
    api = alice_api.post("/api/v1/studies/", _study(acme_dataset, **{field: value}), format="json")
    page = alice_client.post(reverse("study_new"), _study_page_form(acme_dataset, **{field: value}))
    assert api.status_code == 400 and api.json()["field"] == field
    assert shows(page, api.json()["errors"][field][0])
    assert Study.objects.count() == before


@pytest.mark.parametrize("seed", [-1, 2**40])
def test_a_dataset_split_seed_is_refused_alike(alice_client, alice_api, seed):
    api = alice_api.post("/api/v1/datasets/", {"bundled_name": "wine", "seed": seed}, format="json")
    page = alice_client.post(reverse("dataset_list"), {"bundled_name": "wine", "seed": seed, "val_fraction": 0.15,
                                                       "test_fraction": 0.15})
    message = api.json()["errors"]["seed"][0]
    assert message == "Split seed must be a whole number from 0 to 2,147,483,647." and shows(page, message)
    assert not Dataset.objects.filter(bundled_name="wine").exists()


@pytest.mark.parametrize(("route", "body"), [
    ("/api/v1/datasets/", {"bundled_name": "wine", "name": ["a"]}),
    ("/api/v1/ensembles/", {"members": [], "method": "mean", "name": ["a"]}),
])
def test_a_name_sent_as_a_list_is_refused_not_stored_as_text(alice_api, members, route, body):
    if route.endswith("ensembles/"):
        body = {**body, "members": members}
    response = alice_api.post(route, body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"]["name"] == ["Must be text, not a list."]
    assert not Dataset.objects.filter(name='["a"]').exists()
    assert not TrainedModel.objects.filter(name='["a"]').exists()


def test_a_study_name_sent_as_a_list_is_refused(alice_api, acme_dataset):
    response = alice_api.post("/api/v1/studies/", _study(acme_dataset, name=["a"]), format="json")
    assert response.json()["errors"]["name"] == ["Must be text, not a list."]
    assert not Study.objects.exists()
