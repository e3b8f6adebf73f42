"""A NUL character in a query or form value is refused with a 400 and a message, never a 500
(PostgreSQL text cannot hold it)."""

import pytest
from django.urls import reverse

from experiments.models import Dataset, Study

pytestmark = pytest.mark.django_db


def test_a_nul_in_a_page_query_is_refused(alice_client):
    response = alice_client.get(reverse("leaderboard"), {"hypermodel": "dense\x00"})
    assert response.status_code == 400 and b"NUL character" in response.content


def test_a_nul_in_an_api_query_is_refused_as_json(alice_client, acme_dataset):
    response = alice_client.get(f"/api/v1/leaderboard/{acme_dataset.id}/", {"hypermodel": "\x00"})
    assert response.status_code == 400 and "NUL character" in response.json()["detail"]


def test_a_nul_in_a_form_changes_nothing(alice_client):
    before = Dataset.objects.count()
    response = alice_client.post(reverse("dataset_list"), {"bundled_name": "iris", "name": "a\x00b",
                                                           "val_fraction": 0.15, "test_fraction": 0.15, "seed": 0})
    assert response.status_code == 400 and Dataset.objects.count() == before


def test_a_nul_in_an_api_form_names_its_field_and_one_under_no_name_is_refused_too(alice_client, acme_dataset):
    named = alice_client.post("/api/v1/studies/", "name=a%00b", content_type="application/x-www-form-urlencoded")
    assert named.status_code == 400 and named.json()["field"] == "name"
    nameless = alice_client.post("/api/v1/studies/", "=a%00b", content_type="application/x-www-form-urlencoded")
    assert nameless.status_code == 400 and "NUL character" in nameless.json()["detail"]
    assert not Study.objects.exists()
