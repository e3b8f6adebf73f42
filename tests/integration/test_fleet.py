"""Workers register themselves and heartbeat; the fleet and dead queues show in the UI."""

import signal

import pytest

from experiments.models import Worker
from experiments.services.studies import study_create, study_start
from tests.conftest import wait_for
from tests.integration.helpers import TINY_SPACE, digits, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_worker_registers_its_host_queues_devices_and_versions(acme, alice, start_worker):
    worker = start_worker("fleet1", queues="cpu,gpu", concurrency=2)
    row = wait_for(lambda: Worker.objects.filter(name__startswith="fleet1@").first(), timeout=60,
                   what="the worker to register")
    assert set(row.queues) == {"cpu", "gpu"}
    assert row.concurrency == 2
    assert "cpu" in row.devices
    assert {"python", "tensorflow", "keras", "keras-tuner", "celery"} <= set(row.versions)
    first = row.last_heartbeat
    wait_for(lambda: Worker.objects.get(pk=row.pk).last_heartbeat > first, timeout=20, what="a heartbeat")
    worker.kill(signal.SIGTERM)
    wait_for(lambda: Worker.objects.get(pk=row.pk).stopped is not None, timeout=30, what="a clean stop")


def test_the_workers_page_lists_the_fleet_with_each_current_trial(acme, alice, alice_client, start_worker):
    start_worker("fleet2")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=2, epochs=20,
                          patience=20)
    from experiments.models import Trial

    trial = wait_for(lambda: Trial.objects.filter(study=study, status="running").first(), timeout=120,
                     what="a running trial")
    page = alice_client.get("/workers/").content.decode()
    assert "fleet2@" in page and "online" in page
    assert f"trial {trial.number}" in page and study.name in page  # numbered as the study shows it


def test_a_study_on_a_queue_no_live_worker_serves_says_so(acme, alice, alice_client):
    study = study_create(team=acme, user=alice, dataset=digits(acme, alice), name="gpu study", hypermodel="tiny",
                         search_space=TINY_SPACE, objective_metric="val_loss", queue="gpu")
    study_start(study=study)
    page = alice_client.get(f"/studies/{study.id}/").content.decode()
    assert 'id="no-live-worker"' in page and "gpu" in page


def test_other_teams_never_see_which_trials_a_worker_runs(acme, alice, charlie, client, start_worker):
    start_worker("fleet3")
    study = started_study(acme, alice, digits(acme, alice), hypermodel="slow", max_trials=1, epochs=20,
                          patience=20)
    from experiments.models import Trial

    wait_for(lambda: Trial.objects.filter(study=study, status="running").exists(), timeout=120,
             what="a running trial")
    client.force_login(charlie)
    page = client.get("/workers/").content.decode()
    assert "fleet3@" in page
    assert study.name not in page
