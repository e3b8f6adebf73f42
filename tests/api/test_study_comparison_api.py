"""GET /api/v1/studies/compare/: the page's comparison as JSON, scoped to the team; refusals are
400 naming the `studies` field with the page's message, other teams' studies 404."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import saved_study
from tests.web.comparison_rows import scored_study

pytestmark = pytest.mark.django_db
URL = "/api/v1/studies/compare/"


@pytest.fixture
def trio(acme, alice, acme_dataset):
    return (scored_study(acme, alice, acme_dataset, "lr sweep", 8),
            scored_study(acme, alice, acme_dataset, "by loss", 6, objective="val_loss", direction="min",
                         score=lambda number, values: 1.0 / number),
            saved_study(acme, alice, acme_dataset, name="not started", hypermodel="dense"))


def test_it_returns_histories_best_trials_and_importances(alice_api, trio):
    sweep, losses, idle = trio
    response = alice_api.get(URL, {"studies": [sweep.id, losses.id, idle.id]})
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["dataset"] == sweep.dataset_id
    assert [s["id"] for s in data["studies"]] == [sweep.id, losses.id, idle.id]
    assert data["objectives_differ"] is True and data["leader"] is None
    assert data["objectives"] == [
        {"metric": "val_accuracy", "direction": "max", "studies": [sweep.id, idle.id]},
        {"metric": "val_loss", "direction": "min", "studies": [losses.id]}]

    first = data["studies"][0]
    assert first["url"].endswith(f"/api/v1/studies/{sweep.id}/")
    assert first["history"]["number"] == list(range(1, 9)) and first["history"]["total"] == 8
    assert (first["trials_completed"], first["trials_total"]) == (8, 9)
    best = first["best_trial"]
    assert (best["number"], best["label"]) == (7, "Trial 7")
    assert best["url"].endswith(f"/api/v1/studies/{sweep.id}/trials/{best['id']}/")
    assert best["score"] == pytest.approx(0.90007)
    assert best["hyperparameters"] == {"activation": "gelu", "layers": 2, "learning_rate": 0.01}
    assert first["importance"]["rows"][0]["name"] == "learning_rate"
    assert {r["name"]: r["importance"] for r in first["importance"]["rows"]}["layers"] == 0.0

    assert data["studies"][1]["best_trial"]["number"] == 6  # 1/6: the lowest val_loss
    assert data["studies"][2]["best_trial"] is None and data["studies"][2]["history"]["number"] == []
    assert data["studies"][2]["importance"]["message"].startswith("Not enough trials")
    assert {"name": "learning_rate", "values": [0.01, 0.001, None]} in data["hyperparameters"]
    assert "forest of 100 extremely randomised trees" in data["importance_method"]


@pytest.mark.parametrize("query, message", [
    ("", "you picked 0"),
    ("studies={a}", "you picked 1"),
    ("studies={a},{b},{c},7,8", "you picked 5"),
    ("studies={a}&studies=%C2%B2", "'²' is not one"),
    ("studies={a}&studies=-1", "'-1' is not one"),
    ("studies={a}&studies=" + "9" * 5000, "is not one"),
    ("studies={a}&studies=abc", "'abc' is not one"),
])
def test_refusals_are_400_naming_the_studies_field(alice_api, trio, query, message):
    a, b, c = (s.id for s in trio)
    response = alice_api.get(f"{URL}?{query.format(a=a, b=b, c=c)}")
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "studies" and message in body["detail"]


def test_studies_of_different_datasets_are_400(alice_api, acme, alice, trio):
    wine = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="wine"),
                       name="wine study", hypermodel="dense")
    response = alice_api.get(URL, {"studies": [trio[0].id, wine.id]})
    assert response.status_code == 400
    assert "Only studies of one dataset can be compared" in response.json()["detail"]


def test_another_teams_studies_are_404(charlie_api, trio):
    response = charlie_api.get(URL, {"studies": [trio[0].id, trio[1].id]})
    assert response.status_code == 404
    assert "lr sweep" not in response.content.decode()


def test_the_queries_do_not_grow_with_the_number_of_trials(alice_api, acme, alice, acme_dataset):
    def queries(ids):
        with CaptureQueriesContext(connection) as captured:
            assert alice_api.get(URL, {"studies": ids}).status_code == 200
        return len(captured)

    small = [scored_study(acme, alice, acme_dataset, f"small {i}", 5).id for i in range(4)]
    large = [scored_study(acme, alice, acme_dataset, f"large {i}", 300).id for i in range(4)]
    assert queries(small) == queries(large)
