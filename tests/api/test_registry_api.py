"""The registry through the API: register two models as versions of one registered model, a
mismatched signature refused with the pages' message, alias set/move/remove, history and
rollback; other teams get 404 and viewers cannot write."""

import pytest

from experiments.models import AliasMove, ModelAlias, ModelVersion, RegisteredModel
from tests.web.registry_rows import registrable, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_models(acme, alice, acme_study):
    return [registrable(acme, alice, acme_study, n, test_accuracy=acc) for n, acc in ((1, 0.9), (2, 0.95))]


def _registry_state():
    return (RegisteredModel.objects.count(), ModelVersion.objects.count(),
            list(ModelAlias.objects.values_list("name", "version_id")), AliasMove.objects.count())


def test_register_alias_and_roll_back_through_the_api(alice_api, two_models, acme, alice, acme_study):
    first, second = two_models
    created = alice_api.post("/api/v1/registry/", {"name": "iris", "model": first.id}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["version"] == 1 and created.json()["model_name"] == str(first)
    detail_url = created.json()["registered_model"]
    registered_id = RegisteredModel.objects.get().id
    version2 = alice_api.post(f"/api/v1/registry/{registered_id}/versions/", {"model": second.id,
                                                                              "description": "wider"}, format="json")
    assert version2.status_code == 201 and version2.json()["version"] == 2

    images = registrable(acme, alice, acme_study, 3, signature=signature(shape=(None, 8, 8, 1), dtype="uint8"))
    refused = alice_api.post(f"/api/v1/registry/{registered_id}/versions/", {"model": images.id}, format="json")
    assert refused.status_code == 400
    assert "its input is uint8 (None, 8, 8, 1), not float32 (None, 4)" in refused.json()["detail"]

    alias_url = f"/api/v1/registry/{registered_id}/aliases/production/"
    assert alice_api.put(alias_url, {"version": 1}, format="json").status_code == 200
    moved = alice_api.put(alias_url, {"version": 2}, format="json").json()
    assert (moved["alias"], moved["from_version"], moved["to_version"], moved["user"]) == ("production", 1, 2, "alice")
    assert alice_api.get(alias_url).json()["version"] == 2
    bad = alice_api.put(f"/api/v1/registry/{registered_id}/aliases/Prod!/", {"version": 2}, format="json")
    assert bad.status_code == 400 and "may hold only lower-case letters" in bad.json()["detail"]
    missing = alice_api.put(alias_url, {"version": 7}, format="json")
    assert missing.status_code == 400 and missing.json()["detail"] == "iris has no version 7."

    rolled = alice_api.post(moved["rollback_url"], {}, format="json")
    assert rolled.status_code == 200
    assert (rolled.json()["from_version"], rolled.json()["to_version"], rolled.json()["rollback_of"]) == (
        2, 1, moved["id"])
    detail = alice_api.get(detail_url).json()
    assert detail["aliases"] == {"production": 1} and detail["version_count"] == 2
    assert [v["version"] for v in detail["versions"]] == [2, 1]
    assert detail["versions"][1]["aliases"] == ["production"] and detail["versions"][0]["test_metrics"][
        "accuracy"] == 0.95
    assert [(m["from_version"], m["to_version"]) for m in detail["moves"]] == [(2, 1), (1, 2), (None, 1)]
    assert detail["input_signature"] == [{"name": "input_0", "shape": [None, 4], "dtype": "float32"}]
    assert detail["output_keys"] == ["output_0"]
    assert detail["serving_request"] == {"method": "POST", "path": "/v1/models/iris/labels/production:predict",
                                         "body": '{"inputs": {"input_0": [[0.0, 0.0, 0.0, 0.0]]}}', "shortened": False}

    removed = alice_api.delete(alias_url)
    assert removed.status_code == 200 and removed.json()["to_version"] is None
    listed = alice_api.get("/api/v1/registry/").json()
    assert listed["count"] == 1 and listed["results"][0]["aliases"] == {}


def test_the_api_refuses_bad_registrations_with_the_forms_messages(alice_api, two_models, charlie, globex):
    before = _registry_state()
    for body, field, message in [
        ({"name": "Iris!", "model": two_models[0].id}, "name", "may hold only lower-case letters"),
        ({"name": "iris", "model": 999_999}, "model", "Model 999999 was not found in this team."),
        ({"name": "iris"}, "model", "This field is required."),
        ({"name": "iris", "model": two_models[0].id, "colour": "red"}, "colour", "Unknown field."),
    ]:
        response = alice_api.post("/api/v1/registry/", body, format="json")
        assert response.status_code == 400, body
        assert response.json()["field"] == field and message in response.json()["detail"], response.json()
    assert _registry_state() == before


def test_other_teams_get_404_and_viewers_cannot_write(alice_api, bob_api, charlie_api, two_models):
    first, second = two_models
    alice_api.post("/api/v1/registry/", {"name": "iris", "model": first.id}, format="json")
    registered = RegisteredModel.objects.get()
    move_id = alice_api.put(f"/api/v1/registry/{registered.id}/aliases/production/", {"version": 1},
                            format="json").json()["id"]
    routes = [
        ("get", f"/api/v1/registry/{registered.id}/", None),
        ("post", f"/api/v1/registry/{registered.id}/versions/", {"model": second.id}),
        ("get", f"/api/v1/registry/{registered.id}/aliases/production/", None),
        ("put", f"/api/v1/registry/{registered.id}/aliases/production/", {"version": 1}),
        ("delete", f"/api/v1/registry/{registered.id}/aliases/production/", None),
        ("post", f"/api/v1/registry/{registered.id}/moves/{move_id}/rollback/", {}),
    ]
    before = _registry_state()
    for method, url, data in routes:
        response = getattr(charlie_api, method)(url, data, format="json")
        assert response.status_code == 404, (method, url)
    charlie_register = charlie_api.post("/api/v1/registry/", {"name": "iris", "model": second.id}, format="json")
    assert charlie_register.status_code == 400 and "was not found in this team" in charlie_register.json()["detail"]
    assert charlie_api.get("/api/v1/registry/").json()["count"] == 0
    for method, url, data in routes:
        if method != "get":
            assert getattr(bob_api, method)(url, data, format="json").status_code == 403, (method, url)
    assert bob_api.post("/api/v1/registry/", {"name": "x", "model": second.id}, format="json").status_code == 403
    assert _registry_state() == before
    assert bob_api.get(f"/api/v1/registry/{registered.id}/").status_code == 200
