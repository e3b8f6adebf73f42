"""A viewer sees everything in the team but changes nothing: no starting, cancelling,
re-budgeting, uploading, adding bundled datasets or creating studies."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.models import Artifact, Dataset, Study
from experiments.services.studies import study_start
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db

STUDY_STATE = ["status", "message", "started", "finished", "max_trials", "parallelism"]


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


def _counts() -> dict:
    return {model.__name__: model.objects.count() for model in (Dataset, Artifact, Study)}


def _state(study: Study) -> dict:
    study.refresh_from_db()
    return {field: getattr(study, field) for field in STUDY_STATE}


@pytest.mark.parametrize("name", ["dashboard", "dataset_list", "study_list"])
def test_a_viewer_sees_the_team_lists(bob_client, acme_study, name):
    response = bob_client.get(reverse(name))
    assert response.status_code == 200


def test_a_viewer_sees_the_team_lists_with_its_objects(bob_client, acme_study):
    assert acme_study.name in page_text(bob_client.get(reverse("study_list")))
    assert acme_study.dataset.name in page_text(bob_client.get(reverse("dataset_list")))


def test_a_viewer_sees_dataset_study_live_and_trial_pages(
    bob_client, acme_dataset, acme_study, acme_trial
):
    urls = [
        reverse("dataset_detail", args=[acme_dataset.id]),
        reverse("study_detail", args=[acme_study.id]),
        reverse("study_live", args=[acme_study.id]),
        reverse("trial_detail", args=[acme_study.id, acme_trial.pk]),
    ]
    for url in urls:
        assert bob_client.get(url).status_code == 200, url


def test_a_viewer_cannot_start_a_study(bob_client, acme_study):
    before = _state(acme_study)
    response = bob_client.post(reverse("study_start", args=[acme_study.id]))
    assert response.status_code == 403
    assert _state(acme_study) == before
    assert acme_study.status == Study.Status.CREATED


def test_a_viewer_cannot_cancel_a_running_study(bob_client, acme_study):
    study_start(study=acme_study)
    before = _state(acme_study)
    response = bob_client.post(reverse("study_cancel", args=[acme_study.id]))
    assert response.status_code == 403
    assert _state(acme_study) == before
    assert acme_study.status == Study.Status.RUNNING


def test_a_viewer_cannot_change_the_budget_of_a_study(bob_client, acme_study):
    study_start(study=acme_study)
    before = _state(acme_study)
    response = bob_client.post(
        reverse("study_budget", args=[acme_study.id]), {"max_trials": 99, "parallelism": 8}
    )
    assert response.status_code == 403
    assert _state(acme_study) == before


def test_a_viewer_cannot_open_the_upload_page(bob_client):
    response = bob_client.get(reverse("dataset_upload"))
    assert response.status_code == 403
    # Said inside the site's layout, with the way back.
    text = page_text(response)
    assert "ask an owner for the editor role" in text and 'href="/"' in response.content.decode()
    assert 'id="forbidden-message"' in response.content.decode()


def test_a_viewer_cannot_upload_a_dataset(bob_client, acme):
    before = _counts()
    csv = b"a,b,label\n" + b"".join(f"{i},{i % 7},{i % 2}\n".encode() for i in range(40))
    response = bob_client.post(
        reverse("dataset_upload"),
        {
            "name": "sneaky",
            "file": SimpleUploadedFile("data.csv", csv, content_type="text/csv"),
            "target_column": "label",
            "task": "auto",
            "val_fraction": 0.15,
            "test_fraction": 0.15,
            "seed": 0,
        },
    )
    assert response.status_code == 403
    assert _counts() == before


def test_a_viewer_cannot_add_a_bundled_dataset(bob_client, acme):
    before = _counts()
    response = bob_client.post(
        reverse("dataset_list"),
        {
            "bundled_name": "wine",
            "name": "",
            "val_fraction": 0.15,
            "test_fraction": 0.15,
            "seed": 0,
        },
    )
    assert response.status_code == 200
    assert shows(response, "Viewers cannot add datasets.")
    assert _counts() == before
    assert not Dataset.objects.filter(team=acme, name="wine").exists()


def test_a_viewer_is_not_offered_the_forms_that_change_things(bob_client, acme_dataset):
    assert reverse("dataset_upload") not in page_text(bob_client.get(reverse("dataset_list")))
    assert reverse("study_new") not in page_text(
        bob_client.get(reverse("dataset_detail", args=[acme_dataset.id]))
    )


def test_a_viewer_cannot_open_the_new_study_page(bob_client):
    assert bob_client.get(reverse("study_new")).status_code == 403


def test_a_viewer_cannot_create_a_study(bob_client, acme_dataset):
    before = _counts()
    response = bob_client.post(
        reverse("study_new"),
        {
            "name": "sneaky study",
            "dataset": acme_dataset.id,
            "hypermodel": "dense",
            "search_space": json.dumps(TINY_SPACE),
            "tuner": "random",
            "objective_metric": "val_accuracy",
            "objective_direction": "auto",
            "max_trials": 3,
            "executions_per_trial": 1,
            "epochs": 2,
            "batch_size": 32,
            "patience": 2,
            "seed": 1,
            "queue": "cpu",
            "parallelism": 1,
            "start": "1",
        },
    )
    assert response.status_code == 403
    assert _counts() == before
