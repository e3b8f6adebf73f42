"""The API's study create without a seed draws a fresh random one and records it (the page's
form does the same), a seed given is kept, and a clone keeps its original's seed."""

import pytest

from experiments.models import Study
from tests.api.test_resources import _study_body

pytestmark = pytest.mark.django_db


def _create(api, dataset, **fields):
    response = api.post("/api/v1/studies/", fields.pop("body", None) or _study_body(dataset, **fields), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_study_created_without_a_seed_gets_a_random_one_recorded(alice_api, acme_dataset):
    bodies = []
    for name in ("first", "second"):
        body = _study_body(acme_dataset, name=name)
        del body["seed"]
        bodies.append(_create(alice_api, acme_dataset, body=body))
    assert bodies[0]["seed"] != bodies[1]["seed"]
    assert [Study.objects.get(pk=b["id"]).seed for b in bodies] == [b["seed"] for b in bodies]


def test_a_seed_given_is_kept(alice_api, acme_dataset):
    assert _create(alice_api, acme_dataset, seed=7)["seed"] == 7


def test_a_clone_keeps_its_originals_seed_unless_changed(alice_api, acme_dataset):
    original = _create(alice_api, acme_dataset, seed=424242)
    response = alice_api.post(f"/api/v1/studies/{original['id']}/clone/", {"name": "copy"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["seed"] == 424242 and Study.objects.get(name="copy").seed == 424242
