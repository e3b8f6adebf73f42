"""/healthz, /readyz and /metrics: unauthenticated, never a 500, and /metrics is protected."""

import json
import logging
import socket

import pytest
from prometheus_client.parser import text_string_to_metric_families

from experiments.logformat import JsonFormatter
from experiments.models import TrainedModel, Trial
from experiments.services.studies import study_start
from experiments.services.trial_claims import claim_trial
from experiments.services.trial_oracle import Claimant
from tests.integration.helpers import saved_study

pytestmark = pytest.mark.django_db


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(client, **extra) -> dict:
    response = client.get("/metrics", **extra)
    assert response.status_code == 200, response.content
    families = {family.name: family for family in text_string_to_metric_families(response.content.decode())}
    return families


def sample(families, name, suffix="", **labels) -> float:
    for family in families.values():
        for s in family.samples:
            if s.name == name + suffix and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name}{suffix} {labels}")


def test_healthz_answers_ok_without_a_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_answers_ok_with_the_database_and_the_broker_up(client):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"database": "ok", "broker": "ok"}


def test_readyz_answers_503_naming_the_broker_when_it_is_unreachable(client, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["database"] == "ok" and body["broker"] == "failed"
    assert "Connection" in body["errors"]["broker"]


def test_readyz_checks_the_embedded_broker_folder(client, settings, tmp_path):
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path / "missing")}
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["broker"] == "failed"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path)}
    assert client.get("/readyz").status_code == 200


def test_metrics_parse_and_count_requests(client):
    before = sample(scrape(client), "tuneboard_http_requests", "_total", method="GET", status="2xx")
    for _ in range(3):
        client.get("/healthz")
    after = scrape(client)
    assert sample(after, "tuneboard_http_requests", "_total", method="GET", status="2xx") >= before + 3
    assert sample(after, "tuneboard_http_request_duration_seconds", "_count", route="healthz") >= 3
    assert sample(after, "tuneboard_database_up") == 1


def buckets(families, name) -> dict[str, float]:
    return {s.labels["le"]: s.value for s in families[name].samples if s.name == name + "_bucket"}


def test_metrics_trial_gauges_reflect_the_database(client, acme_trial, acme_study):
    families = scrape(client)
    durations = buckets(families, "tuneboard_trial_duration_seconds")
    completed = sample(families, "tuneboard_trials", state="completed", queue=acme_study.queue)
    lost = sample(families, "tuneboard_trials_lost")
    Trial.objects.create(study=acme_study, trial_id="1", number=2, status=Trial.Status.LOST, hyperparameters={})
    Trial.objects.filter(pk=acme_trial.pk).update(duration_seconds=4.0)
    families = scrape(client)
    assert completed >= 1
    assert sample(families, "tuneboard_trials", state="completed", queue=acme_study.queue) == completed
    assert sample(families, "tuneboard_trials", state="lost", queue=acme_study.queue) >= 1
    assert sample(families, "tuneboard_trials_lost") == lost + 1
    assert sample(families, "tuneboard_trial_duration_seconds", "_sum") >= 4.0
    assert families["tuneboard_trial_duration_seconds"].type == "histogram"
    moved = {le: n - durations[le] for le, n in buckets(families, "tuneboard_trial_duration_seconds").items()}
    assert moved == {le: int(float(le) >= 4.0) for le in durations}  # 4 s: in le=5.0 and above only
    assert sample(families, "tuneboard_studies", state="created") >= 1
    for queue in ("cpu", "gpu", "tpu"):
        sample(families, "tuneboard_queue_depth", queue=queue)
        sample(families, "tuneboard_workers_live", queue=queue)


@pytest.mark.filterwarnings("ignore::DeprecationWarning:keras_tuner")
def test_claims_through_the_service_move_the_claim_latency_histogram(client, acme, alice, acme_dataset):
    from workers.tuners.oracle import KerasTunerOracles  # the worker's tuner adapter (this test process only)

    study = study_start(study=saved_study(acme, alice, acme_dataset, parallelism=2))
    before = scrape(client)
    assert before["tuneboard_trial_claim_seconds"].type == "histogram"
    count = sample(before, "tuneboard_trial_claim_seconds", "_count")
    claims = [claim_trial(study_id=study.pk, claimant=Claimant(tuner_id=f"t{i}", worker_host="h"),
                          oracles=KerasTunerOracles()) for i in range(2)]
    assert [c.status for c in claims] == ["running", "running"]
    recorded = [Trial.objects.get(pk=c.trial.pk).claim_ms for c in claims]
    assert all(0 < ms < 5000 for ms in recorded), recorded

    after = scrape(client)
    assert sample(after, "tuneboard_trial_claim_seconds", "_count") == count + 2
    assert sample(after, "tuneboard_trial_claim_seconds", "_sum") == pytest.approx(
        sample(before, "tuneboard_trial_claim_seconds", "_sum") + sum(recorded) / 1000)
    old, new = buckets(before, "tuneboard_trial_claim_seconds"), buckets(after, "tuneboard_trial_claim_seconds")
    assert list(new) == ["0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5",
                         "5.0", "+Inf"]
    assert {le: new[le] - old[le] for le in new} == {le: sum(ms / 1000 <= float(le) for ms in recorded) for le in new}

    # A claim of 3 ms lands in le=0.005 and above, not in le=0.0025.
    Trial.objects.filter(pk=claims[0].trial.pk).update(claim_ms=3.0)
    placed = buckets(scrape(client), "tuneboard_trial_claim_seconds")
    assert placed["0.0025"] == old["0.0025"] + (recorded[1] <= 2.5)
    assert placed["0.005"] == old["0.005"] + 1 + (recorded[1] <= 5)


def test_metrics_off_answers_404(client, settings):
    settings.METRICS_ENABLED = False
    response = client.get("/metrics")
    assert response.status_code == 404 and b"TUNEBOARD_METRICS=off" in response.content


def test_metrics_model_gauges(client, acme_model):
    assert sample(scrape(client), "tuneboard_model_jobs", kind="single", state="completed") >= 1


def test_metrics_need_the_token_when_one_is_set(client, monkeypatch):
    monkeypatch.setenv("TUNEBOARD_METRICS_TOKEN", "s3cret")
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").status_code == 200
    # With a token, a public address is fine too.
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret", REMOTE_ADDR="8.8.8.8").status_code == 200


def test_metrics_refuse_a_public_address_without_a_token(client, monkeypatch):
    monkeypatch.delenv("TUNEBOARD_METRICS_TOKEN", raising=False)
    assert client.get("/metrics", REMOTE_ADDR="8.8.8.8").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_json_log_lines_carry_the_context_fields():
    record = logging.LogRecord("workers.jobs.trials", logging.WARNING, __file__, 1, "trial %s lost", (7,), None)
    record.study_id, record.trial_id = 3, 7
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "workers.jobs.trials"
    assert line["message"] == "trial 7 lost" and line["study_id"] == 3 and line["trial_id"] == 7
    assert "time" in line and "model_id" not in line


def test_metrics_count_each_teams_device_time_by_kind(client, acme, acme_trial, acme_study):
    Trial.objects.filter(pk=acme_trial.pk).update(device_seconds=7200.0, device_kind="gpu")
    Trial.objects.create(study=acme_study, trial_id="1", number=2, status=Trial.Status.FAILED, hyperparameters={},
                         device_seconds=30.0, device_kind="cpu")
    families = scrape(client)
    assert families["tuneboard_trial_device_seconds"].type == "counter"
    assert sample(families, "tuneboard_trial_device_seconds", "_total", team=str(acme.id), device_kind="gpu") == 7200.0
    assert sample(families, "tuneboard_trial_device_seconds", "_total", team=str(acme.id), device_kind="cpu") == 30.0


def test_metrics_count_each_teams_job_device_time_by_job_kind(client, acme, acme_model):
    TrainedModel.objects.filter(pk=acme_model.pk).update(device_seconds=600.0, device_kind="gpu")
    families = scrape(client)
    assert families["tuneboard_job_device_seconds"].type == "counter"
    assert sample(families, "tuneboard_job_device_seconds", "_total", team=str(acme.id), job_kind="models",
                  device_kind="gpu") == 600.0
