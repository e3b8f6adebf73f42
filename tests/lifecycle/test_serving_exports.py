"""Serving exports as jobs (services on PostgreSQL; the worker's code run in this process): one
queued export per team, the plan read from the registry when the export runs, fenced writes,
the reaper, and the export_serving command."""

import json
from datetime import timedelta
from io import StringIO

import pytest
import redis
from django.conf import settings
from django.core.management import call_command
from django.utils import timezone

from experiments.models import ModelConversion, ServingExport
from experiments.selectors.serving_exports import CONVERSION_PENDING, serving_status
from experiments.services import jobs, serving_exports
from experiments.services.job_kinds import JOB_KINDS
from experiments.serving.layout import LayoutSuperseded
from tests.fixtures.registry_rows import move_alias, parsed_config, register, savedmodel_zip_bytes, trained_model
from workers.host import reaper
from workers.jobs.serving_exports import export_serving

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def serving_dir(settings, tmp_path):
    settings.SERVING_DIR = tmp_path / "serving"
    settings.SERVING_BASE_PATH = "/models"
    return settings.SERVING_DIR


@pytest.fixture
def digits(acme, iris):
    first = trained_model(acme, iris, "first", savedmodel=savedmodel_zip_bytes("first"))
    second = trained_model(acme, iris, "second", savedmodel=savedmodel_zip_bytes("second"))
    return register(acme, "digits", [first, second], {"production": 1, "staging": 2})


def claim(export, host="cpu-host"):
    return jobs.job_claim(kind=JOB_KINDS["serving_exports"], pk=export.pk, worker_host=host)


def test_a_request_queues_one_export_per_team_on_the_cpu_queue(acme, globex, django_capture_on_commit_callbacks):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("cpu")
    with django_capture_on_commit_callbacks(execute=True):
        first = serving_exports.serving_export_request(team=acme, reason="manual")
        again = serving_exports.serving_export_request(team=acme, reason="alias:digits@production")
        other = serving_exports.serving_export_request(team=globex, reason="manual")
    assert again.pk == first.pk and other.pk != first.pk
    sent = [json.loads(message)["headers"] for message in broker.lrange("cpu", 0, -1)]
    assert sorted((m["task"], m["argsrepr"]) for m in sent) == sorted(
        [(JOB_KINDS["serving_exports"].task, f"[{first.pk}]"), (JOB_KINDS["serving_exports"].task, f"[{other.pk}]")])
    broker.delete("cpu")
    # While it runs, a request (an alias moved meanwhile) queues a new one: the move gets exported.
    claim(first)
    later = serving_exports.serving_export_request(team=acme, reason="alias:digits@staging")
    assert later.pk != first.pk and later.status == ServingExport.Status.QUEUED
    assert serving_exports.serving_export_request(team=acme, reason="manual").pk == later.pk


# The worker's code closes expired connections first, as around each job: outside a test transaction.
@pytest.mark.django_db(transaction=True)
def test_the_worker_writes_the_teams_folder_as_the_registry_stands_when_it_runs(acme, iris, digits, serving_dir):
    export = serving_exports.serving_export_request(team=acme, reason="manual")
    converting = trained_model(acme, iris, "jax-made", savedmodel=None)
    ModelConversion.objects.create(model=converting, formats=["savedmodel"])
    register(acme, "wine", [converting], {"production": 1})
    move_alias(digits, "production", 2)  # after the request, before the worker runs: exported

    assert export_serving(export_pk=export.pk) == "completed"

    export.refresh_from_db()
    folder = serving_dir / f"team-{acme.pk}"
    assert export.status == ServingExport.Status.COMPLETED and export.duration_seconds > 0
    assert sorted(export.report["written"]) == ["digits/1", "digits/2"]
    assert parsed_config(folder) == {"digits": ("/models/" + f"team-{acme.pk}/digits", [1, 2],
                                         {"production": 2, "staging": 2})}
    assert (folder / "digits" / "2" / "saved_model.pb").read_text() == "graph of second"
    assert {"version": "wine/1", "reason": CONVERSION_PENDING} in export.report["skipped"]
    status = serving_status(team=acme)
    assert status["model_config_file"] == f"/models/team-{acme.pk}/models.config"
    assert status["last_finished"].pk == export.pk


def test_a_stale_attempt_is_refused_and_the_reaper_requeues_a_lost_export(acme, digits):
    export = serving_exports.serving_export_request(team=acme, reason="manual")
    old = claim(export, "a").attempts
    ServingExport.objects.filter(pk=export.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert reaper.reap()["serving_exports"]["requeued"] == 1
    new = claim(export, "b")
    assert new.attempts == old + 1 and [m.name for m in new.plan] == ["digits"]
    assert not jobs.job_heartbeat(kind=JOB_KINDS["serving_exports"], pk=export.pk, attempt=old)
    assert not serving_exports.serving_export_complete(export_pk=export.pk, attempt=old, report={"late": True},
                                                       duration_seconds=1)
    assert serving_exports.serving_export_complete(export_pk=export.pk, attempt=new.attempts, report={"x": 1},
                                                   duration_seconds=1)
    assert ServingExport.objects.get(pk=export.pk).report == {"x": 1}


def test_a_requeued_attempt_writes_nothing_and_a_waiting_one_writes_the_registry_as_it_stands(acme, digits,
                                                                                               serving_dir):
    folder = serving_dir / f"team-{acme.pk}"
    export = serving_exports.serving_export_request(team=acme, reason="manual")
    stale = claim(export, "a")
    ServingExport.objects.filter(pk=export.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    assert reaper.reap()["serving_exports"]["requeued"] == 1
    with pytest.raises(LayoutSuperseded):
        serving_exports.serving_export_write(export=stale)
    assert not (folder / "models.config").exists() and not (folder / "digits").exists()

    # Claimed (its plan read then), then the alias moved before it got the folder's lock: the
    # plan is read again under the lock, so the move is what it writes.
    current = claim(export, "b")
    move_alias(digits, "production", 2)
    serving_exports.serving_export_write(export=current)
    assert parsed_config(folder)["digits"][2] == {"production": 2, "staging": 2}


@pytest.mark.django_db(transaction=True)
def test_a_failing_export_is_failed_with_its_reason_and_the_previous_layout_stays(acme, iris, digits, serving_dir):
    assert export_serving(export_pk=serving_exports.serving_export_request(team=acme, reason="m").pk) == "completed"
    folder = serving_dir / f"team-{acme.pk}"
    before = (folder / "models.config").read_text()
    broken = trained_model(acme, iris, "broken", savedmodel=b"not a zip at all")
    register(acme, "broken", [broken], {"production": 1})
    export = serving_exports.serving_export_request(team=acme, reason="manual")

    assert export_serving(export_pk=export.pk) == "failed"

    export.refresh_from_db()
    assert export.status == ServingExport.Status.FAILED and "broken/1 is not a zip" in export.error
    assert (folder / "models.config").read_text() == before and not (folder / "broken" / "1").exists()


def test_the_command_exports_in_process_and_says_what_it_did(acme, digits, tmp_path):
    out = StringIO()
    call_command("export_serving", team=acme.name, to=str(tmp_path / "here"), base_path="/srv/models", stdout=out)
    printed = out.getvalue()
    assert "Written: digits/1, digits/2" in printed and "Labels of digits: production → 1, staging → 2" in printed
    assert parsed_config(tmp_path / "here")["digits"] == ("/srv/models/digits", [1, 2], {"production": 1, "staging": 2})
    export = ServingExport.objects.get(team=acme)
    assert (export.status, export.reason) == (ServingExport.Status.COMPLETED, "command")

    out = StringIO()
    call_command("export_serving", team=acme.name, to=str(tmp_path / "here"), base_path="/srv/models", stdout=out)
    assert "Written: none" in out.getvalue() and "Kept (unchanged): digits/1, digits/2" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_folder_is_described_by_the_last_export_that_completed_into_it(acme, iris, digits, tmp_path):
    written = serving_exports.serving_export_request(team=acme, reason="manual")
    assert export_serving(export_pk=written.pk) == "completed"
    call_command("export_serving", team=acme.name, to=str(tmp_path / "elsewhere"), stdout=StringIO())
    register(acme, "broken", [trained_model(acme, iris, "broken", savedmodel=b"not a zip")], {"production": 1})
    failed = serving_exports.serving_export_request(team=acme, reason="manual")
    assert export_serving(export_pk=failed.pk) == "failed"
    status = serving_status(team=acme)
    assert status["last"].pk == failed.pk and status["last_finished"].pk == written.pk


def test_the_command_refuses_an_unknown_team(db):
    with pytest.raises(Exception, match="No team named 'nobody'"):
        call_command("export_serving", team="nobody")
