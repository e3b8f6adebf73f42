"""The serving exports API: request one (202, the queued one again while it waits), read the
team's folder with its last export, follow one by id; other teams get 404; viewers cannot write."""

import pytest

from experiments.models import ServingExport

pytestmark = pytest.mark.django_db


def test_a_request_is_accepted_and_followed_by_its_url(alice_api, acme, settings, tmp_path):
    settings.SERVING_DIR, settings.SERVING_BASE_PATH = tmp_path, "/models"
    assert alice_api.get("/api/v1/serving-exports/").json()["last"] is None

    response = alice_api.post("/api/v1/serving-exports/", format="json")

    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "queued" and body["url"].endswith(f"/api/v1/serving-exports/{body['id']}/")
    assert alice_api.post("/api/v1/serving-exports/", format="json").json()["id"] == body["id"]
    assert alice_api.get(body["url"]).json()["reason"] == "api"
    status = alice_api.get("/api/v1/serving-exports/").json()
    assert status["last"]["id"] == body["id"] and status["last_finished"] is None
    assert status["team_folder"] == f"team-{acme.pk}" and status["folder"] == str(tmp_path / f"team-{acme.pk}")
    assert status["model_config_file"] == f"/models/team-{acme.pk}/models.config"


def test_an_unknown_field_is_refused_and_nothing_is_queued(alice_api, acme):
    response = alice_api.post("/api/v1/serving-exports/", {"team": 3}, format="json")
    assert response.status_code == 400 and "team" in str(response.json())
    assert not ServingExport.objects.exists()


def test_another_team_gets_404_for_acmes_export_and_viewers_cannot_write(charlie_api, bob_api, acme):
    export = ServingExport.objects.create(team=acme, reason="manual")
    response = charlie_api.get(f"/api/v1/serving-exports/{export.pk}/")
    assert response.status_code == 404 and response.json()["detail"]
    assert charlie_api.get("/api/v1/serving-exports/").json()["last"] is None
    assert bob_api.post("/api/v1/serving-exports/", format="json").status_code == 403
    assert bob_api.get(f"/api/v1/serving-exports/{export.pk}/").status_code == 200
    assert ServingExport.objects.count() == 1
