"""Stopping rules through the API: set on create, shown on the study, refused with the page's
message and the field named (nothing saved), and carried by a clone."""

import json

import pytest

from experiments.models import Study
from tests.api.test_resources import _study_body

pytestmark = pytest.mark.django_db


def test_a_study_is_created_with_stopping_rules_and_shows_them(alice_api, acme_dataset):
    body = _study_body(acme_dataset, stop_target=0.95, stop_patience=3, stop_min_delta=0.005)
    response = alice_api.post("/api/v1/studies/", body, format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert (created["stop_target"], created["stop_patience"], created["stop_min_delta"]) == (0.95, 3, 0.005)
    shown = alice_api.get(f"/api/v1/studies/{created['id']}/").json()
    assert (shown["stop_target"], shown["stop_patience"], shown["stop_min_delta"]) == (0.95, 3, 0.005)


def test_rules_left_out_or_null_mean_none(alice_api, acme_dataset):
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, stop_target=None, stop_min_delta=None),
                              format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["stop_target"], body["stop_patience"], body["stop_min_delta"]) == (None, None, 0.0)


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"stop_target": "high"}, "stop_target", "Must be a finite number, or empty for no target."),
    ({"stop_target": [1]}, "stop_target", "Must be a number, not a list."),
    ({"stop_patience": 0}, "stop_patience", "Must be a whole number from 1 to 5 (max trials)"),
    ({"stop_patience": 50}, "stop_patience", "Must be a whole number from 1 to 5 (max trials)"),
    ({"stop_patience": 2, "stop_min_delta": -1}, "stop_min_delta", "Must be 0 or a positive number."),
    ({"stop_min_delta": 0.1}, "stop_min_delta", "Only applies with trials without improvement"),
    ({"stop_device_hours": 0}, "stop_device_hours", "Must be a positive number of device-hours"),
])
def test_a_bad_rule_is_a_400_naming_the_field_and_nothing_is_saved(alice_api, acme_dataset, fields, field, message):
    response = alice_api.post("/api/v1/studies/", _study_body(acme_dataset, **fields), format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field and body["errors"][field][0].startswith(message)
    assert not Study.objects.exists()


def test_a_target_too_large_for_a_float_is_refused(alice_api, acme_dataset):
    body = json.dumps(_study_body(acme_dataset, stop_target=1.5)).replace("1.5", "1e400")
    response = alice_api.generic("POST", "/api/v1/studies/", body, content_type="application/json")
    assert response.status_code == 400 and "The number 1e400 is too large." in response.json()["detail"]
    assert not Study.objects.exists()


def test_a_clone_carries_the_rules(alice_api, acme_study):
    Study.objects.filter(pk=acme_study.pk).update(stop_target=0.9, stop_patience=2, stop_min_delta=0.01)
    response = alice_api.post(f"/api/v1/studies/{acme_study.id}/clone/", {"name": "again"}, format="json")
    assert response.status_code == 201, response.json()
    clone = Study.objects.get(pk=response.json()["id"])
    assert (clone.stop_target, clone.stop_patience, clone.stop_min_delta) == (0.9, 2, 0.01)
