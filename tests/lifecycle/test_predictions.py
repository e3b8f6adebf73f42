"""Batch predictions are jobs like the others: one claim per attempt, progress and completion
fenced by the attempt (a cancelled or requeued job refuses the old worker's writes, which is how
the worker hears to stop), the reaper queues a lost one again and fails it after the last attempt."""

import io
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from experiments.datasets.inputs import ModelInputs
from experiments.models import Artifact, ModelFile, PredictionJob, TrainedModel
from experiments.services import jobs, predictions
from experiments.services.artifacts import artifact_create
from experiments.services.job_kinds import JOB_KINDS
from workers.host import reaper

pytestmark = pytest.mark.django_db


def a_file(team, name: str) -> Artifact:
    return artifact_create(team=team, kind=Artifact.Kind.BATCH_PREDICTIONS, filename=name,
                           fileobj=io.BytesIO(name.encode()))


@pytest.fixture
def job(model, alice):
    TrainedModel.objects.filter(pk=model.pk).update(status=TrainedModel.Status.COMPLETED)
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS,
                             artifact=artifact_create(team=model.team, kind=Artifact.Kind.MODEL, filename="m.keras",
                                                      fileobj=io.BytesIO(b"PK")))
    model.refresh_from_db()
    return predictions.prediction_request(team=model.team, user=alice, model=model,
                                          inputs=ModelInputs(x=np.zeros((5, 4), np.float32)), filename="x.csv")


def claim(job):
    return jobs.job_claim(kind=JOB_KINDS["predictions"], pk=job.pk, worker_host="w").attempts


def complete(job, attempt) -> bool:
    return predictions.prediction_complete(prediction_pk=job.pk, attempt=attempt,
                                           predictions_csv=a_file(job.team, "p.csv"),
                                           predictions_npz=a_file(job.team, "p.npz"),
                                           preview=[{"row": "1"}], duration_seconds=0.1)


def test_a_model_that_has_not_finished_is_refused_and_nothing_is_stored(model, alice):
    before = Artifact.objects.count()
    with pytest.raises(predictions.PredictionRequestError, match="has not finished training"):
        predictions.prediction_request(team=model.team, user=alice, model=model,
                                       inputs=ModelInputs(x=np.zeros((1, 4), np.float32)))
    assert Artifact.objects.count() == before and not PredictionJob.objects.exists()


def test_progress_and_completion_are_fenced_by_the_attempt(job):
    attempt = claim(job)
    assert jobs.job_claim(kind=JOB_KINDS["predictions"], pk=job.pk, worker_host="other") is None
    assert predictions.prediction_progress(prediction_pk=job.pk, attempt=attempt, rows_done=2)
    assert not predictions.prediction_progress(prediction_pk=job.pk, attempt=attempt + 1, rows_done=3)
    job.refresh_from_db()
    assert (job.status, job.rows_done) == ("running", 2)
    assert complete(job, attempt)
    job.refresh_from_db()
    assert (job.status, job.rows_done, job.preview) == ("completed", 5, [{"row": "1"}])
    assert job.predictions_csv.filename == "p.csv"


def test_a_cancelled_job_stops_its_worker_at_the_next_progress_and_keeps_no_files(job):
    attempt = claim(job)
    predictions.prediction_cancel(job=job)
    assert not predictions.prediction_progress(prediction_pk=job.pk, attempt=attempt, rows_done=4)
    assert not complete(job, attempt)
    job.refresh_from_db()
    assert job.status == "cancelled" and job.predictions_csv_id is None and job.rows_done == 0
    with pytest.raises(predictions.PredictionCancelError, match="already finished"):
        predictions.prediction_cancel(job=job)


def test_the_reaper_queues_a_lost_job_again_then_fails_it(job):
    def lose():
        PredictionJob.objects.filter(pk=job.pk).update(heartbeat=timezone.now() - timedelta(hours=1))

    first = claim(job)
    lose()
    assert reaper.reap()["predictions"]["requeued"] == 1
    assert not predictions.prediction_progress(prediction_pk=job.pk, attempt=first, rows_done=1)
    second = claim(job)
    assert second == first + 1
    lose()
    assert reaper.reap()["predictions"]["failed"] == 1
    job.refresh_from_db()
    assert job.status == "failed" and "stopped heartbeating" in job.error


def test_image_names_are_stored_as_large_as_they_are_not_as_the_longest_times_their_number(model, alice, job):
    from workers.jobs.predictions import _inputs

    names = ["é" * 60_000] + [f"{i}.png" for i in range(2_000)]  # as a fixed-width array: 480 MB
    stored = predictions.prediction_request(team=model.team, user=alice, model=job.model, filename="x.zip",
                                            inputs=ModelInputs(x=np.zeros((len(names), 4), np.float32), names=names))
    assert stored.inputs.size < 1_000_000
    x, read = _inputs(stored)
    assert read == names and x.shape == (len(names), 4)
