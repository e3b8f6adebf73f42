"""Device time adds up on PostgreSQL: a study's figure is its trials' sum (the page and the API), and
the team page's months sum the studies' figures by device kind."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import TrainedModel, Trial
from experiments.selectors.device_time import model_lineage_device_seconds
from experiments.selectors.studies import study_progress
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import job_add_device_time
from tests.api.conftest import token_client
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_ensemble, finished_trial

pytestmark = pytest.mark.django_db


def test_trials_sum_to_the_study_and_studies_to_the_teams_months(alice, alice_client, acme, acme_dataset,
                                                                  acme_study):
    gpu_study = saved_study(acme, alice, acme_dataset, name="on gpus", queue="gpu")
    finished_trial(acme_study, 1, device_seconds=30.0, device_kind="cpu")
    finished_trial(acme_study, 2, device_seconds=90.0, device_kind="cpu")
    finished_trial(gpu_study, 1, device_seconds=7200.0, device_kind="gpu")  # 1 h on two GPUs
    last_month = timezone.now().replace(day=1) - timedelta(days=3)
    Trial.objects.filter(pk=finished_trial(gpu_study, 2, device_seconds=600.0, device_kind="gpu").pk).update(
        finished=last_month)

    assert study_progress(study=acme_study)["device_seconds"] == 120.0
    assert study_progress(study=gpu_study)["device_seconds"] == 7800.0
    api = token_client(alice)
    assert api.get(reverse("api:study-detail", args=[gpu_study.id])).json()["device_seconds"] == 7800.0
    trials = api.get(reverse("api:trial-list", args=[gpu_study.id])).json()["results"]
    assert sorted(t["device_seconds"] for t in trials) == [600.0, 7200.0]
    assert {t["device_kind"] for t in trials} == {"gpu"}
    page = alice_client.get(reverse("study_detail", args=[acme_study.id])).content.decode()
    assert "2 min of CPU device time" in page

    team = alice_client.get(reverse("team_settings")).content.decode()
    this_month, previous = timezone.now().strftime("%B %Y"), last_month.strftime("%B %Y")
    assert f"<td>{this_month}</td><td>2 min</td><td>2 h 0 min</td><td>0 s</td><td>2 h 2 min</td>" in team
    assert f"<td>{previous}</td><td>0 s</td><td>10 min</td><td>0 s</td><td>10 min</td>" in team


def test_with_prices_set_device_time_is_also_shown_as_money(alice_client, acme_study, settings):
    settings.DEVICE_HOUR_PRICES, settings.PRICE_CURRENCY = {"cpu": 0.5, "gpu": 2.0}, "USD"
    acme_study.stop_device_hours = 2.0
    acme_study.save()
    finished_trial(acme_study, 1, device_seconds=3600.0, device_kind="cpu")
    finished_trial(acme_study, 2, device_seconds=3600.0, device_kind="gpu")
    page = alice_client.get(reverse("study_detail", args=[acme_study.id])).content.decode()
    assert "2 h 0 min of CPU device time ≈ 1.00 USD" in page  # the study's queue prices its total
    assert "budget 2 device-hours" in page
    team = alice_client.get(reverse("team_settings")).content.decode()
    assert "<th scope=\"col\" title=\"At the site's prices per device-hour\">Cost</th>" in team
    assert "<td>2 h 0 min</td><td>2.50 USD</td></tr>" in team  # 0.50 for the CPU hour, 2.00 for the GPU hour


def test_jobs_add_each_attempts_device_time_and_the_team_and_lineage_count_it(alice_client, acme_model, acme_trial):
    models = JOB_KINDS["models"]
    Trial.objects.filter(pk=acme_trial.pk).update(device_seconds=90.0, device_kind="cpu", finished=timezone.now())
    TrainedModel.objects.filter(pk=acme_model.pk).update(attempts=1, attempt_started=timezone.now())  # as a claim
    assert job_add_device_time(kind=models, pk=acme_model.pk, attempt=1, seconds=100.0, device_kind="gpu", devices=2)
    TrainedModel.objects.filter(pk=acme_model.pk).update(  # the reaper gave it a second attempt
        attempts=2, attempt_started=timezone.now())
    assert job_add_device_time(kind=models, pk=acme_model.pk, attempt=2, seconds=50.0, device_kind="gpu", devices=2)
    assert not job_add_device_time(kind=models, pk=acme_model.pk, attempt=3, seconds=1e6, device_kind="gpu",
                                   devices=1)  # not an attempt it had
    acme_model.refresh_from_db()
    assert (acme_model.device_seconds, acme_model.device_kind) == (300.0, "gpu")
    assert model_lineage_device_seconds(acme_model) == 390.0  # with the trial it came from

    body = token_client(acme_model.created_by).get(reverse("api:model-detail", args=[acme_model.pk])).json()
    assert (body["device_seconds"], body["device_kind"], body["lineage_device_seconds"]) == (300.0, "gpu", 390.0)
    page = alice_client.get(reverse("model_detail", args=[acme_model.pk])).content.decode()
    assert "5 min of GPU for this job; 6 min for its whole lineage" in page
    team = alice_client.get(reverse("team_settings")).content.decode()
    this_month = timezone.now().strftime("%B %Y")
    assert f"<td>{this_month}</td><td>2 min</td><td>5 min</td><td>0 s</td><td>6 min</td>" in team
    board = alice_client.get(reverse("leaderboard") + f"?dataset={acme_model.dataset_id}").content.decode()
    assert 'device-time" title="Its job, its trial and an ensemble\'s members: wall time × devices held">6 min</td>' \
        in board
    api_board = token_client(acme_model.created_by).get(
        reverse("api:leaderboard", args=[acme_model.dataset_id])).json()
    assert api_board["results"][0]["device_seconds"] == 390.0


def test_an_ensembles_lineage_counts_each_model_and_trial_once(acme, alice, acme_study, acme_trial, acme_model):
    Trial.objects.filter(pk=acme_trial.pk).update(device_seconds=100.0)
    TrainedModel.objects.filter(pk=acme_model.pk).update(device_seconds=10.0)
    # The model retrained from the trial, and the trial itself: the trial's 100 s once, not twice.
    blend = finished_ensemble(acme, alice, acme_study.dataset, [acme_model, acme_trial], [0.5, 0.5])
    TrainedModel.objects.filter(pk=blend.pk).update(device_seconds=1.0)
    blend.refresh_from_db()
    assert model_lineage_device_seconds(blend) == 111.0
