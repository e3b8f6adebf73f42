"""The API's clone (and study creation) with a dataset, a warm start (seed_from, top_k), the
page's messages for seeds that do not fit, 404 for other teams' studies and datasets, and
where a seeded trial comes from."""

import pytest

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import TINY_SPACE, saved_study

pytestmark = pytest.mark.django_db

TRIALS = {1: ({"units": 4, "learning_rate": 0.01}, 0.7), 2: ({"units": 8, "learning_rate": 0.002}, 0.9),
          3: ({"units": 16, "learning_rate": 0.05}, 0.5)}


@pytest.fixture
def source(acme_study) -> Study:
    for number, (values, score) in TRIALS.items():
        Trial.objects.create(study=acme_study, trial_id=str(number - 1), number=number, hyperparameters=values,
                             status=Trial.Status.COMPLETED, score=score)
    return acme_study


def _clone(api, study, **body):
    return api.post(f"/api/v1/studies/{study.id}/clone/", body, format="json")


def test_a_clone_goes_to_another_dataset_seeded_with_the_top_k(alice_api, acme, alice, source):
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    response = _clone(alice_api, source, dataset=wine.id, seed_from=[source.id], top_k=2)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "acme study (copy)" and body["dataset"] == wine.id and body["status"] == "created"
    assert [seed["hyperparameters"] for seed in body["seeds"]] == [TRIALS[2][0], TRIALS[1][0]]
    assert [seed["label"] for seed in body["seeds"]] == ["Trial 2 of acme study", "Trial 1 of acme study"]
    assert body["seeds_used"] == 0 and body["search_space"] == source.search_space


def test_a_clone_without_a_warm_start_is_not_seeded(alice_api, source):
    response = _clone(alice_api, source, name="plain")
    assert response.status_code == 201 and response.json()["seeds"] == []


def test_seeds_that_do_not_fit_are_refused_with_the_pages_message(alice_api, acme, alice, source):
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    cnn = saved_study(acme, alice, images, name="cnn study", hypermodel="cnn",
                      search_space=[{"name": "filters", "type": "int", "min": 16, "max": 64, "step": 16,
                                     "sampling": "linear", "parent": None, "parent_values": []}])
    response = _clone(alice_api, cnn, seed_from=[source.id])
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "seed_from"
    assert "Trial 2 of acme study: units is not a hyperparameter of the new search space." in body["errors"][
        "seed_from"]
    assert Study.objects.count() == 2


@pytest.mark.parametrize(("body", "field"), [
    ({"seed_from": "abc"}, "seed_from"), ({"seed_from": [True]}, "seed_from"), ({"top_k": 50}, "top_k"),
    ({"dataset": "x"}, "dataset"), ({"dataset": [1, 2]}, "dataset"), ({"seeds": []}, "seeds"),
])
def test_bad_clone_bodies_are_400(alice_api, source, body, field):
    response = _clone(alice_api, source, **body)
    assert response.status_code == 400 and response.json()["field"] == field
    assert Study.objects.count() == 1


def test_another_teams_study_or_dataset_is_404_and_nothing_is_saved(alice_api, charlie, globex, source):
    theirs = dataset_create_bundled(team=globex, user=charlie, bundled_name="iris")
    their_study = saved_study(globex, charlie, theirs, name="globex study", hypermodel="dense")
    assert _clone(alice_api, source, seed_from=[source.id, their_study.id]).status_code == 404
    assert _clone(alice_api, source, dataset=theirs.id).status_code == 404
    assert _clone(alice_api, their_study).status_code == 404
    body = {"name": "api study", "dataset": source.dataset_id, "hypermodel": "dense", "search_space": TINY_SPACE,
            "tuner": "random", "objective_metric": "val_accuracy", "seed_from": [their_study.id]}
    assert alice_api.post("/api/v1/studies/", body, format="json").status_code == 404
    assert Study.objects.count() == 2


def test_a_new_study_can_warm_start_too(alice_api, source):
    body = {"name": "api study", "dataset": source.dataset_id, "hypermodel": "dense", "search_space": TINY_SPACE,
            "tuner": "random", "objective_metric": "val_accuracy", "seed_from": [source.id], "top_k": 1}
    response = alice_api.post("/api/v1/studies/", body, format="json")
    assert response.status_code == 201, response.json()
    assert [seed["trial"] for seed in response.json()["seeds"]] == [Trial.objects.get(study=source, number=2).pk]


def test_a_seeded_trial_says_which_trial_it_comes_from(alice_api, acme, alice, source):
    clone = saved_study(acme, alice, source.dataset, name="warm", hypermodel="dense", seed_from=[source])
    origin = Trial.objects.get(study=source, number=2)
    seeded = Trial.objects.create(study=clone, trial_id="0", number=1, status=Trial.Status.RUNNING,
                                  hyperparameters=origin.hyperparameters, seeded_from=origin)
    own = Trial.objects.create(study=clone, trial_id="1", number=2, status=Trial.Status.RUNNING,
                               hyperparameters={"units": 12, "learning_rate": 0.02})
    rows = {t["id"]: t for t in alice_api.get(f"/api/v1/studies/{clone.id}/trials/").json()["results"]}
    assert rows[own.pk]["seeded_from"] is None
    source_of = rows[seeded.pk]["seeded_from"]
    assert {k: source_of[k] for k in ("trial", "study", "number")} == {"trial": origin.pk, "study": source.id,
                                                                      "number": 2}
    assert alice_api.get(source_of["url"]).json()["hyperparameters"] == origin.hyperparameters
