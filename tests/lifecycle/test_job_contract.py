"""The contract every job kind of services/job_kinds.py's JOB_KINDS keeps, checked once per kind (as
optuna checks its storages over STORAGE_MODES): one claim per attempt, fenced writes, heartbeat,
hand-back on stop without a lost attempt, reap and retry, cancel, fail with a reason; and the
worker's runner (workers/jobs/runner.py) handing a job back when its worker stops."""

import io
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from experiments.datasets.inputs import ModelInputs
from experiments.models import (
    Artifact,
    ModelConversion,
    ModelFile,
    ModelVariant,
    Study,
    TeamQueuePolicy,
    TrainedModel,
    Trial,
)
from experiments.selectors.fair_share import queue_standing
from experiments.selectors.queue_board import queue_board
from experiments.services import jobs
from experiments.services.artifacts import artifact_create
from experiments.services.fair_share import team_quota_locked
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.jobs import MAX_ATTEMPTS
from experiments.services.predictions import prediction_request
from experiments.services.serving_exports import serving_export_request
from experiments.services.trial_reruns import trial_rerun_request
from experiments.services.variants import variant_request
from experiments.states import JobStatus
from tests.lifecycle.test_conversions import complete_model
from workers.host import shutdown
from workers.jobs.runner import run_job
from workers.trial_stops import TrialCancelled

pytestmark = pytest.mark.django_db


def _model(model, **_):
    return model


def _rerun(model, alice, **_):
    trial = Trial.objects.create(study=model.study, trial_id="9", number=9, status=Trial.Status.COMPLETED,
                                 hyperparameters={"units": 8, "learning_rate": 0.01}, score=0.9, best_epoch=2)
    return trial_rerun_request(trial=trial, user=alice)


def _conversion(model, **_):
    assert complete_model(model)
    return ModelConversion.objects.get(model=model)


def _serving_export(acme, **_):
    return serving_export_request(team=acme, reason="manual")


def _completed_with_keras_file(model):
    TrainedModel.objects.filter(pk=model.pk).update(status=TrainedModel.Status.COMPLETED)
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS,
                             artifact=artifact_create(team=model.team, kind=Artifact.Kind.MODEL, filename="m.keras",
                                                      fileobj=io.BytesIO(b"PK")))
    model.refresh_from_db()
    return model


def _prediction(model, alice, **_):
    model = _completed_with_keras_file(model)
    return prediction_request(team=model.team, user=alice, model=model,
                              inputs=ModelInputs(x=np.zeros((5, 4), np.float32)), filename="x.csv")


def _variant(model, alice, **_):
    return variant_request(model=_completed_with_keras_file(model), method=ModelVariant.Method.KERAS_INT8, user=alice)


# One factory per kind: a queued row of it.
FACTORIES = {"models": _model, "reruns": _rerun, "conversions": _conversion, "serving_exports": _serving_export,
             "predictions": _prediction, "variants": _variant}


def test_every_job_kind_is_covered_by_the_contract():
    assert set(FACTORIES) == set(JOB_KINDS)


@pytest.fixture(params=list(JOB_KINDS))
def kind(request):
    return JOB_KINDS[request.param]


@pytest.fixture
def row(kind, model, acme, alice):
    return FACTORIES[kind.name](model=model, acme=acme, alice=alice)


@pytest.fixture
def sent(monkeypatch, django_capture_on_commit_callbacks):
    """The tasks sent to the broker, as (task name, args, queue), once their transaction commits."""
    messages = []
    monkeypatch.setattr("experiments.services.queueing.current_app.send_task",
                        lambda task, args, queue, countdown=None: messages.append((task, args, queue)))
    return messages


def lose(kind, row):
    kind.table.objects.filter(pk=row.pk).update(heartbeat=timezone.now() - timedelta(hours=1))


def current(kind, row):
    return kind.table.objects.get(pk=row.pk)


def test_a_job_is_claimed_once(kind, row):
    claimed = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a")
    assert claimed is not None and claimed.attempts == 1
    assert jobs.job_claim(kind=kind, pk=row.pk, worker_host="b") is None  # a duplicated delivery finds nothing
    assert (current(kind, row).status, current(kind, row).worker_host) == (JobStatus.RUNNING, "a")


def test_the_heartbeat_bumps_while_the_attempt_owns_the_job(kind, row):
    attempt = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    lose(kind, row)
    before = current(kind, row).heartbeat
    assert jobs.job_heartbeat(kind=kind, pk=row.pk, attempt=attempt)
    assert current(kind, row).heartbeat > before


def test_a_stale_attempt_is_fenced_once_the_reaper_requeued_the_job(kind, row):
    old = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    lose(kind, row)
    assert jobs.jobs_reap(kind=kind)["requeued"] == 1
    assert current(kind, row).status == JobStatus.QUEUED
    new = jobs.job_claim(kind=kind, pk=row.pk, worker_host="b").attempts
    assert new == old + 1
    assert not jobs.job_heartbeat(kind=kind, pk=row.pk, attempt=old)
    assert not jobs.job_move(kind=kind, pk=row.pk, target=JobStatus.COMPLETED, attempt=old)
    assert not jobs.job_fail(kind=kind, pk=row.pk, attempt=old, error="late")
    assert current(kind, row).status == JobStatus.RUNNING


def test_a_job_handed_back_on_stop_loses_no_attempt_and_is_sent_again(kind, row, sent,
                                                                      django_capture_on_commit_callbacks):
    old = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs.job_release(kind=kind, pk=row.pk, attempt=old)
    after = current(kind, row)
    assert (after.status, after.releases, after.worker_host) == (JobStatus.QUEUED, 1, "")
    assert after.attempts - after.releases == old - 1  # the released attempt is not counted as lost
    assert [(task, args) for task, args, _queue in sent] == [(kind.task, [row.pk])]
    assert not jobs.job_release(kind=kind, pk=row.pk, attempt=old)  # only the owner releases, once
    assert jobs.job_claim(kind=kind, pk=row.pk, worker_host="b").attempts == old + 1


def test_a_lost_job_is_retried_then_failed_with_the_reason(kind, row):
    for _ in range(MAX_ATTEMPTS):
        jobs.job_claim(kind=kind, pk=row.pk, worker_host="a")
        lose(kind, row)
        jobs.jobs_reap(kind=kind)
    after = current(kind, row)
    assert after.status == JobStatus.FAILED
    assert after.error.startswith(f"Lost {MAX_ATTEMPTS} times: the worker a stopped heartbeating")


def test_a_lost_attempt_counts_its_device_time_once(kind, row):
    """The reaper adds what the lost attempt held (start to last heartbeat, on its devices); its worker, if it was
    only cut off and reports late, is refused, and the next attempt's own report counts."""
    attempt = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    assert jobs.job_hold_devices(kind=kind, pk=row.pk, attempt=attempt, devices=2)
    now = timezone.now()
    kind.table.objects.filter(pk=row.pk).update(attempt_started=now - timedelta(minutes=30),
                                                heartbeat=now - timedelta(minutes=20))
    assert jobs.jobs_reap(kind=kind, now=now)["requeued"] == 1
    after = current(kind, row)
    assert after.device_seconds == pytest.approx(10 * 60 * 2) and after.device_kind == _queue_of(kind, row)
    assert not jobs.job_add_device_time(kind=kind, pk=row.pk, attempt=attempt, seconds=1800, device_kind="cpu",
                                        devices=2), "counted once, by the reaper"
    again = jobs.job_claim(kind=kind, pk=row.pk, worker_host="b").attempts
    assert jobs.job_add_device_time(kind=kind, pk=row.pk, attempt=again, seconds=60, device_kind="cpu", devices=1)
    assert current(kind, row).device_seconds == pytest.approx(1200 + 60)


def test_a_cancelled_job_refuses_its_worker(kind, row):
    attempt = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    assert jobs.job_cancel(kind=kind, pk=row.pk)
    assert (current(kind, row).status, current(kind, row).error) == (JobStatus.CANCELLED, "Cancelled by a user.")
    assert not jobs.job_heartbeat(kind=kind, pk=row.pk, attempt=attempt)
    assert not jobs.job_cancel(kind=kind, pk=row.pk)  # a finished job stays as it is


def test_a_failed_job_keeps_its_reason(kind, row):
    attempt = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a").attempts
    assert jobs.job_fail(kind=kind, pk=row.pk, attempt=attempt, error="ValueError: boom", environment={"host": "a"})
    after = current(kind, row)
    assert (after.status, after.error, after.environment) == (JobStatus.FAILED, "ValueError: boom", {"host": "a"})


# --- the runner ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def same_connection(monkeypatch):
    """A test's transaction lives on its connection: the runner must not recycle it here."""
    monkeypatch.setattr("workers.jobs.runner.connections_close_expired", lambda: None)


@pytest.fixture
def stopping():
    shutdown.request_stop()
    yield
    shutdown._FLAG[0] = 0  # the flag is the process's: later tests run a worker that is not stopping


def test_the_runner_hands_a_job_back_at_once_when_its_worker_is_stopping(kind, row, stopping, sent,
                                                                          django_capture_on_commit_callbacks):
    worked = []
    with django_capture_on_commit_callbacks(execute=True):
        assert run_job(kind, row.pk, worked.append, keras=False) == "released"
    after = current(kind, row)
    assert not worked and (after.status, after.attempts, after.releases) == (JobStatus.QUEUED, 1, 1)
    assert [task for task, _args, _queue in sent] == [kind.task]


def test_the_runner_hands_a_job_back_when_its_work_stops_for_the_shutdown(kind, row, sent,
                                                                          django_capture_on_commit_callbacks):
    def work(run):
        shutdown.request_stop()  # SIGTERM while it works: it stops at its next step or epoch end
        raise TrialCancelled()

    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert run_job(kind, row.pk, work, keras=False) == "released"
    finally:
        shutdown._FLAG[0] = 0
    after = current(kind, row)
    assert (after.status, after.attempts - after.releases) == (JobStatus.QUEUED, 0)
    assert [task for task, _args, _queue in sent] == [kind.task]


def test_the_runner_fails_a_crashed_job_with_its_reason(kind, row):
    def work(run):
        raise ValueError("boom")

    assert run_job(kind, row.pk, work, keras=False, environment=lambda: {"host": "h"}) == "failed"
    after = current(kind, row)
    assert (after.status, after.error, after.environment) == (JobStatus.FAILED, "ValueError: boom", {"host": "h"})


def test_the_runner_says_superseded_when_the_completion_is_refused(kind, row):
    def work(run):
        jobs.job_cancel(kind=kind, pk=run.pk)
        return jobs.job_move(kind=kind, pk=run.pk, target=JobStatus.COMPLETED, attempt=run.attempt)

    assert run_job(kind, row.pk, work, keras=False) == "superseded"
    assert run_job(kind, row.pk, work, keras=False) == "nothing to do"
    assert current(kind, row).status == JobStatus.CANCELLED


def test_the_runner_logs_each_run_with_the_crashs_traceback_and_releases_memory_whatever_the_outcome(
        kind, row, monkeypatch):
    from experiments.selectors.job_logs import job_logs
    from workers.jobs import runner

    released = []
    monkeypatch.setattr(runner, "release_memory", lambda keras, trial_seconds: released.append(trial_seconds))

    def work(run):
        print(f"working on {kind.label} {run.pk}")
        raise ValueError("boom")

    assert run_job(kind, row.pk, work) == "failed"
    assert len(released) == 1, "the memory a crashed job held is released"
    (log,) = job_logs(kind=kind.name, job_id=row.pk)
    text = log.text()
    assert not log.running and log.attempt == 1
    assert text.index(f"working on {kind.label} {row.pk}") < text.index("Traceback") < text.index("ValueError: boom")


def _queue_of(kind, row) -> str:
    """The accelerator queue the row's work runs on (a JAX study's jobs go to "cpu-jax": still CPU)."""
    return kind.queue_of(kind.table.objects.select_related(*kind.send_related).get(pk=row.pk)).removesuffix("-jax")


def _running_study(model, queue: str) -> Study:
    Study.objects.filter(pk=model.study_id).update(queue=queue, status=Study.Status.RUNNING)
    return Study.objects.get(pk=model.study_id)


def test_a_job_of_a_team_at_its_quota_waits_saying_why_and_is_claimed_once_the_quota_frees(
        kind, row, model, sent, django_capture_on_commit_callbacks):
    queue = _queue_of(kind, row)
    TeamQueuePolicy.objects.create(team=model.team, queue=queue, max_concurrent=1)
    study = _running_study(model, queue)
    busy = Trial.objects.create(study=study, trial_id="1", number=1, status=Trial.Status.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        assert jobs.job_claim(kind=kind, pk=row.pk, worker_host="a") is None
    assert [(task, args) for task, args, _queue in sent] == [(kind.task, [row.pk])], "it asks again later, once"
    waiting = current(kind, row)
    assert waiting.status == JobStatus.QUEUED and waiting.attempts == 0
    assert waiting.queue_wait == (f"Waiting: the team's quota of 1 concurrent trial or job on the {queue.upper()} "
                                  "queue is in use; it frees when one of them ends.")
    Trial.objects.filter(pk=busy.pk).update(status=Trial.Status.COMPLETED)
    claimed = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a")
    assert claimed is not None and claimed.attempts == 1 and current(kind, row).queue_wait == ""


def test_a_running_job_holds_one_of_its_teams_slots(kind, row, model):
    """A team with a quota of one slot running a job of this kind: its study's trials wait."""
    queue = _queue_of(kind, row)
    assert jobs.job_claim(kind=kind, pk=row.pk, worker_host="a") is not None
    TeamQueuePolicy.objects.create(team=model.team, queue=queue, max_concurrent=1)
    study = _running_study(model, queue)
    assert "concurrent trial or job" in team_quota_locked(study)
    standing = queue_standing(queue=queue, backend="tensorflow", kinds=JOB_KINDS.values())
    assert standing.held == {model.team_id: 1}


def test_a_running_jobs_current_run_counts_towards_its_teams_device_hours(kind, row, model):
    """From its current attempt's start on the devices its worker child holds, not its first attempt's
    start: a handed-back run counts once, through the device time it recorded."""
    queue = _queue_of(kind, row)
    TeamQueuePolicy.objects.create(team=model.team, queue=queue, device_hours_per_month=100)
    now = timezone.now().replace(day=15, hour=12)  # mid-month: the month's start clips nothing
    first = jobs.job_claim(kind=kind, pk=row.pk, worker_host="a")
    kind.table.objects.filter(pk=row.pk).update(started=now - timedelta(hours=3))
    assert jobs.job_release(kind=kind, pk=row.pk, attempt=first.attempts)
    assert jobs.job_add_device_time(kind=kind, pk=row.pk, attempt=first.attempts, seconds=1800, device_kind="cpu",
                                    devices=2)
    second = jobs.job_claim(kind=kind, pk=row.pk, worker_host="b")
    assert jobs.job_hold_devices(kind=kind, pk=row.pk, attempt=second.attempts, devices=2)
    assert not jobs.job_hold_devices(kind=kind, pk=row.pk, attempt=first.attempts, devices=8), "fenced"
    kind.table.objects.filter(pk=row.pk).update(attempt_started=now - timedelta(minutes=30))
    standing = queue_standing(queue=queue, backend="tensorflow", kinds=JOB_KINDS.values(), now=now)
    assert standing.device_hours[model.team_id] == pytest.approx(1.0 + 1.0), "the handed-back run + 30 min on 2"
    board = queue_board(queue=queue, team=model.team, kinds=JOB_KINDS.values(), now=now)
    assert [job["since"] for job in board["running"] if job.get("job")] == [now - timedelta(minutes=30)]
