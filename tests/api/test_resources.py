"""Each resource's happy path, and its validation messages as the pages word them."""

import io
import json

import pytest

from experiments.models import Dataset, Study, TrainedModel
from tests.integration.helpers import TINY_SPACE
from tests.web.figures_rows import finished_model, finished_trial

pytestmark = pytest.mark.django_db


def _study_body(ds, **fields):
    return {"name": "api study", "dataset": ds.id, "hypermodel": "dense", "search_space": TINY_SPACE,
            "tuner": "random", "objective_metric": "val_accuracy", "objective_direction": "auto", "max_trials": 5,
            "executions_per_trial": 1, "epochs": 4, "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu",
            "parallelism": 1, **fields}


def test_a_bundled_dataset_is_added_and_listed_with_filters(alice_api):
    response = alice_api.post("/api/v1/datasets/", {"bundled_name": "iris", "name": "flowers"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["n_rows"] == 150
    assert alice_api.get("/api/v1/datasets/?q=flow&task=classification").json()["count"] == 1
    assert alice_api.get("/api/v1/datasets/?task=regression").json()["count"] == 0
    assert alice_api.get("/api/v1/datasets/?task=nonsense").status_code == 400


def test_a_csv_upload_gives_the_upload_pages_messages(alice_api):
    csv = io.BytesIO(b"a,b,label\n" + b"".join(f"{i},{i % 7},{i % 2}\n".encode() for i in range(40)))
    csv.name = "small.csv"
    response = alice_api.post("/api/v1/datasets/", {"name": "small", "file": csv, "target_column": "nope"},
                              format="multipart")
    assert response.status_code == 400
    assert response.json()["detail"] and not Dataset.objects.exists()
    csv.seek(0)
    response = alice_api.post("/api/v1/datasets/", {"name": "small", "file": csv, "target_column": "label"},
                              format="multipart")
    assert response.status_code == 201, response.json()
    assert response.json()["n_rows"] == 40


def test_a_study_is_created_and_started_with_202(alice_api, acme_dataset):
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, start=True), format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["url"].endswith(f"/api/v1/studies/{response.json()['id']}/")
    assert Study.objects.get().status == Study.Status.RUNNING
    assert response.json()["progress"] == {"completed": 0, "pruned": 0, "failed": 0, "running": 0, "total": 0,
                                         "max_trials": 5}


def test_a_saved_study_is_201_and_can_be_started_cancelled_resumed(alice_api, acme_dataset):
    study_id = alice_api.post("/api/v1/studies/", _study_body(acme_dataset), format="json").json()["id"]
    assert alice_api.post(f"/api/v1/studies/{study_id}/resume/").status_code == 409
    assert alice_api.post(f"/api/v1/studies/{study_id}/start/").status_code == 202
    assert alice_api.post(f"/api/v1/studies/{study_id}/start/").status_code == 409
    assert alice_api.post(f"/api/v1/studies/{study_id}/cancel/").json()["status"] == "cancelled"
    assert alice_api.post(f"/api/v1/studies/{study_id}/resume/").json()["status"] == "running"


def test_a_bad_search_space_gets_the_forms_messages(alice_api, alice_client, acme_dataset):
    rows = [{"name": "units", "type": "int", "min": 64, "max": 8, "step": 8, "sampling": "linear", "parent": None,
             "parent_values": []}]
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, search_space=rows), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "search_space"
    assert body["errors"]["search_space"] == ["Fix the hyperparameters marked below."]
    assert any("greater than max" in m for m in body["errors"]["search_space.0"])
    assert not Study.objects.exists()


@pytest.mark.parametrize("bad, field", [
    ({"max_trials": 10**30}, "max_trials"), ({"max_trials": "many"}, "max_trials"), ({"dataset": 10**30}, "dataset"),
    ({"colour": "blue"}, "colour"), ({"objective_metric": "test_accuracy"}, "objective_metric"),
])
def test_bad_study_fields_are_400_with_the_field_named(alice_api, acme_dataset, bad, field):
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, **bad), format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field


@pytest.mark.parametrize("payload", [[1, 2], "text", 5, None])
def test_a_body_that_is_not_an_object_is_400(alice_api, payload):
    response = alice_api.post("/api/v1/studies/", json.dumps(payload), content_type="application/json")
    assert response.status_code == 400
    assert set(response.json()) == {"detail", "field", "errors"}


def test_malformed_json_is_400(alice_api):
    response = alice_api.post("/api/v1/studies/", "{nope", content_type="application/json")
    assert response.status_code == 400


def test_the_budget_changes_and_is_checked(alice_api, acme_study):
    url = f"/api/v1/studies/{acme_study.id}/budget/"
    assert alice_api.patch(url, {"max_trials": 20}, format="json").json()["max_trials"] == 20
    response = alice_api.patch(url, {"parallelism": 1000}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "parallelism"


def test_a_study_is_cloned_unstarted(alice_api, acme_study):
    response = alice_api.post(f"/api/v1/studies/{acme_study.id}/clone/", {"name": "again"}, format="json")
    assert response.status_code == 201
    assert response.json()["status"] == "created" and response.json()["search_space"] == acme_study.search_space


def test_studies_filter_and_order(alice_api, acme_study, acme_running_study):
    assert alice_api.get("/api/v1/studies/?status=running").json()["count"] == 1
    assert alice_api.get("/api/v1/studies/?status=created").json()["count"] == 0
    assert alice_api.get("/api/v1/studies/?q=acme&ordering=name").json()["count"] == 1
    assert alice_api.get("/api/v1/studies/?dataset=abc").status_code == 400
    assert alice_api.get("/api/v1/studies/?ordering=password").status_code == 400


def test_studies_filter_by_a_trials_tag_on_sqlite_and_postgresql(alice_api, acme_study):
    trial = finished_trial(acme_study, 1, epochs=1)
    trial.tags = ["baseline", "wide"]
    trial.save(update_fields=["tags"])
    assert [st["id"] for st in alice_api.get("/api/v1/studies/?tag=Wide").json()["results"]] == [acme_study.id]
    assert alice_api.get("/api/v1/studies/?tag=wid").json()["count"] == 0  # whole tags, not parts
    assert alice_api.get('/api/v1/studies/?tag=%22wide%22').json()["count"] == 0


def test_trials_are_ordered_filtered_paginated_and_polled(alice_api, acme_study):
    trials = [finished_trial(acme_study, n, score=s, epochs=2) for n, s in ((1, 0.5), (2, 0.9), (3, 0.7))]
    url = f"/api/v1/studies/{acme_study.id}/trials/"
    by_metric = alice_api.get(url + "?ordering=-val_accuracy").json()["results"]
    assert [t["number"] for t in by_metric] == [2, 3, 1]
    assert [t["number"] for t in alice_api.get(url + "?ordering=score").json()["results"]] == [1, 3, 2]
    assert [t["number"] for t in alice_api.get(url + "?ordering=hp.units").json()["results"]] == [1, 2, 3]
    page = alice_api.get(url + "?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    after = alice_api.get(url + f"?after={trials[0].pk}").json()["results"]
    assert [t["id"] for t in after] == [trials[1].pk, trials[2].pk]
    assert alice_api.get(url + "?after=-1").status_code == 400
    assert alice_api.get(url + "?after=" + "9" * 40).status_code == 400
    assert alice_api.get(url + "?status=failed").json()["count"] == 0
    epochs = alice_api.get(url + f"{trials[1].pk}/epochs/").json()
    assert epochs["count"] == 2
    detail = alice_api.get(url + f"{trials[1].pk}/").json()
    assert detail["score"] == 0.9
    assert alice_api.get(f"/api/v1/studies/{acme_study.id}/").json()["best_trial"]["id"] == trials[1].pk


def test_models_are_requested_with_202_and_listed(alice_api, acme_study, acme_trial):
    url = f"/api/v1/studies/{acme_study.id}/models/"
    response = alice_api.post(url, {"top_n": 1, "method": "retrain"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["url"] and len(response.json()["models"]) == 1
    response = alice_api.post(url, {"trial": acme_trial.pk, "method": "retrain", "epoch_cap": 5}, format="json")
    assert response.status_code == 202
    assert TrainedModel.objects.filter(status="queued").count() == 2
    assert alice_api.get(f"/api/v1/models/?study={acme_study.id}&status=queued").json()["count"] == 2
    response = alice_api.post(url, {"top_n": 0}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "top_n"


def test_a_model_is_shown_and_downloaded_with_its_checksum(alice_api, acme_model):
    detail = alice_api.get(f"/api/v1/models/{acme_model.id}/").json()
    assert detail["files"][0]["format"] == "keras"
    response = alice_api.get(f"/api/v1/models/{acme_model.id}/download/keras/")
    assert response.status_code == 200
    data = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(data)
    assert response["X-Content-SHA256"] == detail["files"][0]["sha256"]
    assert alice_api.get(f"/api/v1/models/{acme_model.id}/download/tflite/").status_code == 404


def test_an_ensemble_is_saved_with_202_and_shown(alice_api, acme, alice, acme_study):
    t1, t2 = finished_trial(acme_study, 1, epochs=1), finished_trial(acme_study, 2, epochs=1)
    m1 = finished_model(acme, alice, acme_study, t1, name="a")
    m2 = finished_model(acme, alice, acme_study, t2, name="b")
    response = alice_api.post("/api/v1/ensembles/", {"members": [f"model:{m1.id}", f"model:{m2.id}"],
                                                     "method": "greedy", "greedy_rounds": 10}, format="json")
    assert response.status_code == 202, response.json()
    ensemble = response.json()
    assert ensemble["kind"] == "ensemble" and len(ensemble["members"]) == 2
    assert alice_api.get(ensemble["url"]).status_code == 200
    response = alice_api.post("/api/v1/ensembles/", {"members": [f"model:{m1.id}"], "method": "mean"}, format="json")
    assert response.json()["detail"] == "Pick at least two members: an ensemble of one is that model."
    assert alice_api.get(f"/api/v1/ensembles/{m1.id}/").status_code == 404


def test_the_leaderboard_ranks_like_the_page_and_gives_csv(alice_api, acme, alice, acme_study):
    t1 = finished_trial(acme_study, 1, epochs=1)
    finished_model(acme, alice, acme_study, t1, name="low", test={"accuracy": 0.5, "loss": 1.0})
    finished_model(acme, alice, acme_study, t1, name="high", test={"accuracy": 0.95, "loss": 0.1})
    board = alice_api.get(f"/api/v1/leaderboard/{acme_study.dataset_id}/").json()
    assert board["metric"] == "accuracy"
    assert [r["model_name"] for r in board["results"]] == ["high", "low"]
    csv = alice_api.get(f"/api/v1/leaderboard/{acme_study.dataset_id}/?format=csv")
    assert csv["Content-Type"].startswith("text/csv")
    assert alice_api.get(f"/api/v1/leaderboard/{acme_study.dataset_id}/?since=yesterday").status_code == 400


def test_workers_are_listed(alice_api):
    from experiments.models import Worker
    Worker.objects.create(name="w1@host", hostname="host", pid=1, queues=["cpu"])
    Worker.objects.create(name="w2@host", hostname="host", pid=2, queues=["gpu-jax"],
                          packing={"setting": "auto", "trials_per_gpu": 4, "reason": "measuring 4 trials per GPU"})
    results = alice_api.get("/api/v1/workers/").json()["results"]
    assert results[0]["name"] == "w1@host" and results[0]["alive"] is True and results[0]["packing"] == {}
    assert results[1]["packing"]["trials_per_gpu"] == 4 and results[1]["packing"]["setting"] == "auto"
