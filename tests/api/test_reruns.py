"""The API requests re-runs (202 with the trial's URL), lists them in the trial's detail with how
close each came, and shows the environment of trials and models."""

import pytest
from django.utils import timezone

from experiments.models import Trial, TrialRerun

pytestmark = pytest.mark.django_db


def _reruns_url(trial) -> str:
    return f"/api/v1/studies/{trial.study_id}/trials/{trial.pk}/reruns/"


def _detail_url(trial) -> str:
    return f"/api/v1/studies/{trial.study_id}/trials/{trial.pk}/"


def test_a_rerun_is_accepted_with_the_url_of_the_trial_that_lists_it(alice_api, acme_trial):
    response = alice_api.post(_reruns_url(acme_trial))
    assert response.status_code == 202, response.json()
    body = response.json()
    assert body["url"] == "http://testserver" + _detail_url(acme_trial)
    assert body["rerun"]["number"] == 1 and body["rerun"]["status"] == "queued"
    assert body["rerun"]["seed"] == acme_trial.study.seed + acme_trial.number and body["rerun"]["comparison"] is None
    listed = alice_api.get(body["url"]).json()["reruns"]
    assert [r["id"] for r in listed] == [body["rerun"]["id"]]


def test_a_second_rerun_while_one_is_queued_is_a_conflict(alice_api, acme_trial):
    assert alice_api.post(_reruns_url(acme_trial)).status_code == 202
    response = alice_api.post(_reruns_url(acme_trial))
    assert response.status_code == 409
    assert response.json()["detail"] == "A re-run of this trial is already queued or running; wait for it to finish."
    assert TrialRerun.objects.count() == 1


def test_a_trial_that_did_not_complete_is_a_conflict(alice_api, acme_trial):
    Trial.objects.filter(pk=acme_trial.pk).update(status=Trial.Status.LOST)
    response = alice_api.post(_reruns_url(acme_trial))
    assert response.status_code == 409 and "Only a completed trial can be re-run" in response.json()["detail"]


def test_a_viewer_is_refused_and_another_team_finds_nothing(bob_api, charlie_api, acme_trial):
    assert bob_api.post(_reruns_url(acme_trial)).status_code == 403
    assert charlie_api.post(_reruns_url(acme_trial)).status_code == 404
    assert charlie_api.get(_detail_url(acme_trial)).status_code == 404
    assert not TrialRerun.objects.exists()


def test_the_trial_detail_carries_the_environment_and_each_reruns_comparison(alice_api, acme_trial):
    environment = {"seed": 2, "host": "h1", "versions": {"tensorflow": "2.21.0"}}
    Trial.objects.filter(pk=acme_trial.pk).update(environment=environment)
    TrialRerun.objects.create(trial=acme_trial, number=1, seed=2, status=TrialRerun.Status.COMPLETED, score=0.85,
                              best_epoch=2, metrics={"val_accuracy": 0.85, "val_loss": 0.3},
                              environment={**environment, "host": "h2"}, finished=timezone.now())
    body = alice_api.get(_detail_url(acme_trial)).json()
    assert body["environment"] == environment
    (rerun,) = body["reruns"]
    comparison = rerun["comparison"]
    assert comparison["objective"]["name"] == "val_accuracy"
    assert comparison["objective"]["absolute"] == pytest.approx(0.05)
    assert comparison["objective"]["relative"] == pytest.approx(0.05 / 0.9)
    assert comparison["environment_differences"] == [{"key": "host", "original": "h1", "rerun": "h2",
                                                      "input": False}]
    assert comparison["same_inputs"] is True and comparison["same_environment"] is False
    # The list stays light: re-runs are in the detail only.
    listed = alice_api.get(f"/api/v1/studies/{acme_trial.study_id}/trials/").json()["results"][0]
    assert "reruns" not in listed and listed["environment"] == environment


def test_a_models_detail_carries_its_environment(alice_api, acme_model):
    type(acme_model).objects.filter(pk=acme_model.pk).update(environment={"seed": 2, "host": "h1"})
    assert alice_api.get(f"/api/v1/models/{acme_model.id}/").json()["environment"] == {"seed": 2, "host": "h1"}
