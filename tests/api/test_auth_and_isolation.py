"""Tokens from the tokens page act for their user in the user's team; other teams' objects are
404 and stay unchanged; viewers cannot write; the browser session works too."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from experiments.models import ApiToken, Study, TrainedModel

pytestmark = pytest.mark.django_db


def _token_from_page(client, name="laptop", days="", role=None):
    """A token made as a person makes one: for the team the page proposes (the current one), with
    the role it proposes (the user's own) unless `role` is given."""
    initial = client.get("/account/tokens/").context["form"].initial
    response = client.post("/account/tokens/", {"name": name, "days": days, "team": initial["team"],
                                                "role": role or initial["role"]})
    assert response.status_code == 200
    match = re.search(r'id="token-value" value="([^"]+)"', response.content.decode())
    assert match, "the new token is shown once"
    return match.group(1)


def _bearer(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_a_token_made_on_the_page_works_as_a_bearer_token(alice_client, acme_dataset):
    token = _token_from_page(alice_client)

    response = _bearer(token).get("/api/v1/datasets/")

    assert response.status_code == 200
    assert [d["name"] for d in response.json()["results"]] == ["iris"]
    stored = ApiToken.objects.get(name="laptop")
    assert token not in (stored.digest, stored.token_key), "only a hash is kept"
    page = alice_client.get("/account/tokens/").content.decode()
    assert "laptop" in page and token not in page, "listed, never shown again"


def test_a_revoked_token_is_refused(alice_client, acme_dataset):
    token = _token_from_page(alice_client)
    key = ApiToken.objects.get().token_key
    alice_client.post("/account/tokens/", {"revoke": key})

    response = _bearer(token).get("/api/v1/datasets/")

    assert response.status_code == 401
    assert response.json()["detail"]
    assert not ApiToken.objects.exists()


def test_an_expired_token_is_refused(alice_client, acme_dataset):
    token = _token_from_page(alice_client, days="1")
    ApiToken.objects.update(expiry=timezone.now() - timedelta(seconds=1))

    assert _bearer(token).get("/api/v1/datasets/").status_code == 401


def test_a_bad_token_and_no_token_are_refused_with_401():
    assert _bearer("nonsense").get("/api/v1/studies/").status_code == 401
    response = APIClient().get("/api/v1/studies/")
    assert response.status_code == 401
    assert set(response.json()) == {"detail", "field", "errors"}


def test_the_page_refuses_a_token_without_a_name(alice_client):
    response = alice_client.post("/account/tokens/", {"name": " ", "days": ""})
    assert "Give the token a name" in response.content.decode()
    assert not ApiToken.objects.exists()


def test_the_browser_session_works(alice_client, acme_study):
    response = alice_client.get(f"/api/v1/studies/{acme_study.id}/")
    assert response.status_code == 200
    assert response.json()["name"] == "acme study"


def test_the_team_header_chooses_the_team_and_a_foreign_team_is_refused(alice_api, acme, globex, acme_dataset):
    assert alice_api.get("/api/v1/datasets/", HTTP_X_TUNEBOARD_TEAM=str(acme.id)).json()["count"] == 1
    assert alice_api.get("/api/v1/datasets/", HTTP_X_TUNEBOARD_TEAM=str(globex.id)).status_code == 403
    assert alice_api.get("/api/v1/datasets/", HTTP_X_TUNEBOARD_TEAM="x" * 40).status_code == 403


def _acme_routes(dataset, study, trial, model):
    s, t = study.id, trial.pk
    return [
        ("get", f"/api/v1/datasets/{dataset.id}/", None),
        ("get", f"/api/v1/studies/{s}/", None),
        ("get", f"/api/v1/studies/compare/?studies={s}&studies={s}", None),
        ("get", f"/api/v1/studies/{s}/trials/", None),
        ("get", f"/api/v1/studies/{s}/trials/{t}/", None),
        ("get", f"/api/v1/studies/{s}/trials/{t}/epochs/", None),
        ("post", f"/api/v1/studies/{s}/start/", {}),
        ("post", f"/api/v1/studies/{s}/resume/", {}),
        ("post", f"/api/v1/studies/{s}/cancel/", {}),
        ("patch", f"/api/v1/studies/{s}/budget/", {"max_trials": 50, "parallelism": 4}),
        ("post", f"/api/v1/studies/{s}/clone/", {"name": "stolen"}),
        ("post", f"/api/v1/studies/{s}/models/", {"top_n": 1}),
        ("post", f"/api/v1/studies/{s}/models/", {"trial": t, "method": "promote"}),
        ("get", f"/api/v1/models/{model.id}/", None),
        ("get", f"/api/v1/models/{model.id}/logs/", None),
        ("get", f"/api/v1/studies/{s}/trials/{t}/logs/", None),
        ("get", f"/api/v1/studies/{s}/trials/{t}/system-metrics/", None),
        ("get", f"/api/v1/models/{model.id}/download/keras/", None),
        ("get", f"/api/v1/ensembles/{model.id}/", None),
        ("get", f"/api/v1/leaderboard/{dataset.id}/", None),
        ("get", f"/api/v1/leaderboard/{dataset.id}/?format=csv", None),
    ]


def _state():
    return (list(Study.objects.order_by("pk").values("status", "max_trials", "parallelism", "name")),
            list(TrainedModel.objects.order_by("pk").values("id", "status")))


def test_every_route_answers_404_to_another_team_and_changes_nothing(charlie_api, acme_dataset, acme_study,
                                                                      acme_trial, acme_model):
    before = _state()
    for method, url, data in _acme_routes(acme_dataset, acme_study, acme_trial, acme_model):
        response = getattr(charlie_api, method)(url, data, format="json")
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.json()["detail"]
    assert _state() == before


def test_another_teams_objects_are_not_listed_or_usable_as_references(charlie_api, acme_dataset, acme_study,
                                                                      acme_trial, acme_model):
    for url in ("/api/v1/datasets/", "/api/v1/studies/", "/api/v1/models/"):
        assert charlie_api.get(url).json()["count"] == 0
    assert charlie_api.get(f"/api/v1/models/?study={acme_study.id}").json()["count"] == 0
    response = charlie_api.post("/api/v1/ensembles/", {"members": [f"model:{acme_model.id}",
                                                                   f"trial:{acme_trial.pk}"], "method": "mean"},
                                format="json")
    assert response.status_code == 400
    assert "was not found in this team" in response.json()["detail"]


def test_viewers_cannot_write(bob_api, acme_dataset, acme_study, acme_trial, acme_model):
    before = _state()
    for method, url, data in _acme_routes(acme_dataset, acme_study, acme_trial, acme_model):
        if method == "get":
            continue
        response = getattr(bob_api, method)(url, data, format="json")
        assert response.status_code == 403, (method, url)
    assert bob_api.post("/api/v1/datasets/", {"bundled_name": "wine"}, format="json").status_code == 403
    assert _state() == before
    assert bob_api.get(f"/api/v1/studies/{acme_study.id}/").status_code == 200
