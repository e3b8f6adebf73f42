"""Model runs: one claim per attempt, fenced writes, lost and never-delivered jobs sent again,
cancel, and failing after the last attempt."""

from datetime import timedelta

import pytest
from django.utils import timezone

from experiments.models import ModelFile, TrainedModel, TrainedModelEpoch
from experiments.services import jobs, trained_models
from experiments.services.job_kinds import JOB_KINDS

pytestmark = pytest.mark.django_db


def claim(model, host="a"):
    return jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host=host)


def lose(model):
    TrainedModel.objects.filter(pk=model.pk).update(heartbeat=timezone.now() - timedelta(hours=1))


def complete(model, attempt):
    return trained_models.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"loss": 0.1}, test_metrics={"loss": 0.2}, signature={},
                                     versions={}, files={}, duration_seconds=1.0)


def test_one_worker_claims_a_model_and_a_duplicate_finds_nothing(model):
    assert model.last_sent is not None or TrainedModel.objects.get(pk=model.pk).last_sent is not None
    first = claim(model)
    assert first.status == TrainedModel.Status.RUNNING and first.attempts == 1
    assert claim(model, "b") is None


def test_a_superseded_worker_is_refused_and_the_new_attempt_owns_the_model(model):
    old = claim(model, "a").attempts
    assert trained_models.model_record_epoch(model_pk=model.pk, attempt=old, phase="retrain", epoch=0,
                                             metrics={"loss": 1})
    lose(model)
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["requeued"] == 1
    new = claim(model, "b").attempts
    assert new == old + 1
    assert not TrainedModelEpoch.objects.filter(model=model).exists()  # the old attempt's curve is gone
    # The old worker wakes up: every write is refused, so it stops and stores nothing.
    assert not jobs.job_heartbeat(kind=JOB_KINDS["models"], pk=model.pk, attempt=old)
    assert not trained_models.model_record_epoch(model_pk=model.pk, attempt=old, phase="retrain", epoch=1, metrics={})
    assert not complete(model, old)
    assert not jobs.job_fail(kind=JOB_KINDS["models"], pk=model.pk, attempt=old, error="late")
    row = TrainedModel.objects.get(pk=model.pk)
    assert (row.status, row.worker_host, row.error) == (TrainedModel.Status.RUNNING, "b", "")
    assert complete(model, new)
    assert TrainedModel.objects.get(pk=model.pk).status == TrainedModel.Status.COMPLETED


def test_a_model_whose_task_never_arrived_is_sent_again_with_backoff(model, settings):
    long_ago = timezone.now() - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1)
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["resent"] == 0  # just sent: it may still arrive
    TrainedModel.objects.filter(pk=model.pk).update(last_sent=long_ago)
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["resent"] == 1
    row = TrainedModel.objects.get(pk=model.pk)
    assert row.resends == 1 and row.last_sent > long_ago
    TrainedModel.objects.filter(pk=model.pk).update(last_sent=long_ago)
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["resent"] == 0  # the second resend waits twice as long
    assert claim(model) is not None
    assert TrainedModel.objects.get(pk=model.pk).resends == 0


def test_cancel_stops_a_running_model_and_never_undoes_a_completed_one(model):
    attempt = claim(model).attempts
    trained_models.model_cancel(model=model)
    assert not trained_models.model_record_epoch(model_pk=model.pk, attempt=attempt, phase="retrain", epoch=0,
                                                 metrics={})
    assert not complete(model, attempt)
    row = TrainedModel.objects.get(pk=model.pk)
    assert row.status == TrainedModel.Status.CANCELLED and not ModelFile.objects.filter(model=model).exists()
    with pytest.raises(trained_models.ModelCancelError, match="cancelled"):
        trained_models.model_cancel(model=row)


def test_a_completed_model_cannot_be_cancelled(model):
    assert complete(model, claim(model).attempts)
    with pytest.raises(trained_models.ModelCancelError, match="completed"):
        trained_models.model_cancel(model=model)
    assert TrainedModel.objects.get(pk=model.pk).status == TrainedModel.Status.COMPLETED


def test_a_model_released_by_a_stopping_worker_is_requeued_without_penalty(model, django_capture_on_commit_callbacks):
    old = claim(model, "a").attempts
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert jobs.job_release(kind=JOB_KINDS["models"], pk=model.pk, attempt=old)
    assert len(sent) == 1  # its task goes back to the broker at once, not after the resend delay
    row = TrainedModel.objects.get(pk=model.pk)
    assert (row.status, row.releases, row.worker_host) == (TrainedModel.Status.QUEUED, 1, "")
    assert not jobs.job_release(kind=JOB_KINDS["models"], pk=model.pk, attempt=old)  # only the owner releases, once
    # The next attempt is fenced as usual, and being lost on it still leaves one retry:
    # the release did not use up an attempt.
    new = claim(model, "b").attempts
    assert new == old + 1 and not jobs.job_heartbeat(kind=JOB_KINDS["models"], pk=model.pk, attempt=old)
    lose(model)
    assert jobs.jobs_reap(kind=JOB_KINDS["models"])["requeued"] == 1
