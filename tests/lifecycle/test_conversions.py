"""Conversions: a model completed by a worker without TensorFlow queues one conversion of its
.keras file on the cpu queue; a conversion is a job like the others (one claim per attempt,
fenced writes, reaper, release), and its completion adds the files to the model's downloads and
the reasons for the formats it could not make to the model's signature."""

import io
import json
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from experiments.models import Artifact, ModelConversion, ModelFile, TrainedModel
from experiments.services import conversions, jobs, trained_models
from experiments.services.artifacts import artifact_create
from experiments.services.job_kinds import JOB_KINDS
from workers.host import reaper

pytestmark = pytest.mark.django_db
TF_FORMATS = ["savedmodel", "tflite", "tflite_int8"]
PENDING_REASON = "Made later from the .keras file on a TensorFlow worker."


def a_file(team, name: str) -> Artifact:
    return artifact_create(team=team, kind=Artifact.Kind.MODEL, filename=name,
                           fileobj=io.BytesIO(b"bytes " + name.encode()))


def complete_model(model, pending=tuple(TF_FORMATS)) -> bool:
    """As a JAX worker completes a model: the .keras file only, the other formats pending."""
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="jax-host").attempts
    signature = {"keras": {"inputs": [], "outputs": []}, "input_description": {"keras": "float32 features"},
                 "unavailable": dict.fromkeys(pending, PENDING_REASON)}
    return trained_models.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"loss": 0.1}, test_metrics={"loss": 0.2}, signature=signature,
                                     versions={}, files={"keras": a_file(model.team, "m-v1.keras")},
                                     duration_seconds=1.0, pending_formats=pending)


@pytest.fixture
def conversion(model):
    assert complete_model(model)
    return ModelConversion.objects.get(model=model)


def claim(conversion, host="tf-host"):
    return jobs.job_claim(kind=JOB_KINDS["conversions"], pk=conversion.pk, worker_host=host)


def lose(conversion):
    ModelConversion.objects.filter(pk=conversion.pk).update(heartbeat=timezone.now() - timedelta(hours=1))


def complete(conversion, attempt, *, files=None, unavailable=None, signature=None):
    team = conversion.model.team
    files = files if files is not None else {"savedmodel": a_file(team, "m-v1-savedmodel.zip"),
                                             "tflite": a_file(team, "m-v1.tflite")}
    return conversions.conversion_complete(
        conversion_pk=conversion.pk, attempt=attempt, files=files, duration_seconds=2.5,
        unavailable={"tflite_int8": "TFLite cannot hold this model (int8)."} if unavailable is None else unavailable,
        signature=signature if signature is not None else {
            "serving": {"name": "serving_default", "inputs": [{"name": "features"}], "outputs": []},
            "input_description": {fmt: "float32 feature vectors of length 4" for fmt in ("keras", *files)}},
        environment={"host": "tf-host"})


def test_a_model_completed_without_tensorflow_queues_one_conversion_on_the_cpu_queue(
        model, django_capture_on_commit_callbacks):
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("cpu")
    with django_capture_on_commit_callbacks(execute=True):
        assert complete_model(model)
    (conversion,) = ModelConversion.objects.filter(model=model)
    assert (conversion.status, conversion.formats) == (ModelConversion.Status.QUEUED, TF_FORMATS)
    assert conversion.last_sent is not None  # the reaper re-sends from here if the task is lost
    assert TrainedModel.objects.get(pk=model.pk).status == TrainedModel.Status.COMPLETED  # usable (.keras) now
    sent = [json.loads(message) for message in broker.lrange("cpu", 0, -1)]
    assert [(m["headers"]["task"], m["headers"]["argsrepr"]) for m in sent] == [
        (JOB_KINDS["conversions"].task, f"[{conversion.pk}]")]
    broker.delete("cpu")


def test_a_model_with_every_format_queues_no_conversion(model):
    assert complete_model(model, pending=())
    assert not ModelConversion.objects.exists()


def test_a_superseded_model_completion_queues_no_conversion(model):
    old = jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="a").attempts
    TrainedModel.objects.filter(pk=model.pk).update(heartbeat=timezone.now() - timedelta(hours=1))
    jobs.jobs_reap(kind=JOB_KINDS["models"])
    jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="b")
    assert not trained_models.model_complete(model_pk=model.pk, attempt=old, best_epoch=2, epochs=2, val_metrics={},
                                         test_metrics={}, signature={}, versions={}, files={},
                                         duration_seconds=1.0, pending_formats=TF_FORMATS)
    assert not ModelConversion.objects.exists()


def test_a_second_request_while_one_is_queued_returns_that_one(conversion):
    again = conversions.conversion_request(model=conversion.model, formats=["tflite"])
    assert again.pk == conversion.pk and ModelConversion.objects.count() == 1


def test_only_formats_made_from_a_keras_file_can_be_requested(model):
    for formats in ([], ["keras"], ["onnx"]):
        with pytest.raises(ValueError, match="A conversion makes some of"):
            conversions.conversion_request(model=model, formats=formats)


def test_one_worker_claims_a_conversion_with_the_keras_file_and_a_duplicate_finds_nothing(conversion):
    row = claim(conversion)
    assert (row.status, row.attempts, row.worker_host) == (ModelConversion.Status.RUNNING, 1, "tf-host")
    assert row.keras_artifact == conversion.model.files.get(format="keras").artifact
    assert (row.model.name, row.model.version, row.model.team) == (conversion.model.name, 1, conversion.model.team)
    assert claim(conversion, "other") is None


def test_completion_adds_the_files_and_merges_the_reasons_into_the_signature(conversion):
    assert complete(conversion, claim(conversion).attempts)
    row = ModelConversion.objects.get(pk=conversion.pk)
    assert row.status == ModelConversion.Status.COMPLETED and row.finished and row.duration_seconds == 2.5
    assert row.unavailable == {"tflite_int8": "TFLite cannot hold this model (int8)."}
    model = TrainedModel.objects.get(pk=conversion.model_id)
    assert sorted(model.files.values_list("format", flat=True)) == ["keras", "savedmodel", "tflite"]
    # The pending reasons are replaced by the converter's own; the rest of the signature stays.
    assert model.signature["unavailable"] == {"tflite_int8": "TFLite cannot hold this model (int8)."}
    assert model.signature["input_description"] == {"keras": "float32 features",  # the model's own, kept
                                                    "savedmodel": "float32 feature vectors of length 4",
                                                    "tflite": "float32 feature vectors of length 4"}
    assert model.signature["serving"]["name"] == "serving_default"
    assert model.signature["keras"] == {"inputs": [], "outputs": []}


def test_a_format_made_neither_as_a_file_nor_refused_gets_a_reason(conversion):
    assert complete(conversion, claim(conversion).attempts, unavailable={})
    assert TrainedModel.objects.get(pk=conversion.model_id).signature["unavailable"] == {
        "tflite_int8": conversions.NO_FILE_REASON}


def test_a_file_the_conversion_was_not_asked_for_is_not_stored(conversion, django_capture_on_commit_callbacks):
    extra = a_file(conversion.model.team, "again.keras")
    with django_capture_on_commit_callbacks(execute=True):
        assert complete(conversion, claim(conversion).attempts,
                        files={"keras": extra, "savedmodel": a_file(conversion.model.team, "s.zip")})
    model = TrainedModel.objects.get(pk=conversion.model_id)
    assert model.files.get(format="keras").artifact_id != extra.pk  # the model's own .keras file stays
    assert not Artifact.objects.filter(pk=extra.pk).exists()  # and the stray one is deleted


def test_a_stale_attempt_is_refused_and_the_new_attempt_owns_the_conversion(conversion):
    old = claim(conversion, "a").attempts
    lose(conversion)
    assert jobs.jobs_reap(kind=JOB_KINDS["conversions"])["requeued"] == 1
    new = claim(conversion, "b").attempts
    assert new == old + 1
    # The old worker wakes up: every write is refused, so it stores nothing.
    assert not jobs.job_heartbeat(kind=JOB_KINDS["conversions"], pk=conversion.pk, attempt=old)
    assert not complete(conversion, old)
    assert not jobs.job_fail(kind=JOB_KINDS["conversions"], pk=conversion.pk, attempt=old, error="late")
    assert list(ModelFile.objects.filter(model=conversion.model).values_list("format", flat=True)) == ["keras"]
    row = ModelConversion.objects.get(pk=conversion.pk)
    assert (row.status, row.worker_host, row.error) == (ModelConversion.Status.RUNNING, "b", "")
    assert complete(conversion, new)
    assert ModelConversion.objects.get(pk=conversion.pk).status == ModelConversion.Status.COMPLETED


def test_the_reaper_requeues_a_lost_conversion_and_fails_it_after_the_last_attempt(conversion,
                                                                                   django_capture_on_commit_callbacks):
    claim(conversion)
    lose(conversion)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert reaper.reap()["conversions"]["requeued"] == 1
    assert len(sent) == 1  # its task is sent again
    assert ModelConversion.objects.get(pk=conversion.pk).status == ModelConversion.Status.QUEUED
    for _ in range(jobs.MAX_ATTEMPTS - 1):
        claim(conversion)
        lose(conversion)
        reaper.reap()
    row = ModelConversion.objects.get(pk=conversion.pk)
    assert row.status == ModelConversion.Status.FAILED and f"Lost {jobs.MAX_ATTEMPTS} times" in row.error
    assert TrainedModel.objects.get(pk=conversion.model_id).status == TrainedModel.Status.COMPLETED


def test_a_conversion_whose_task_never_arrived_is_sent_again_with_backoff(conversion, settings):
    long_ago = timezone.now() - timedelta(seconds=settings.RESEND_AFTER_SECONDS + 1)
    assert jobs.jobs_reap(kind=JOB_KINDS["conversions"])["resent"] == 0  # just sent: it may still arrive
    ModelConversion.objects.filter(pk=conversion.pk).update(last_sent=long_ago)
    assert reaper.reap()["conversions"]["resent"] == 1
    ModelConversion.objects.filter(pk=conversion.pk).update(last_sent=long_ago)
    assert jobs.jobs_reap(kind=JOB_KINDS["conversions"])["resent"] == 0  # the second resend waits twice as long
    assert claim(conversion).resends == 0


def test_a_failed_conversion_keeps_its_reason_and_the_model_its_keras_file(conversion):
    attempt = claim(conversion).attempts
    assert jobs.job_fail(kind=JOB_KINDS["conversions"], pk=conversion.pk, attempt=attempt, error="ValueError: bad file")
    row = ModelConversion.objects.get(pk=conversion.pk)
    assert (row.status, row.error) == (ModelConversion.Status.FAILED, "ValueError: bad file")
    assert not complete(conversion, attempt)
    model = TrainedModel.objects.get(pk=conversion.model_id)
    assert model.status == TrainedModel.Status.COMPLETED
    assert list(model.files.values_list("format", flat=True)) == ["keras"]


def test_deleting_the_model_deletes_its_conversion_and_refuses_the_workers_completion(conversion):
    attempt = claim(conversion).attempts
    ModelFile.objects.filter(model=conversion.model).delete()
    TrainedModel.objects.filter(pk=conversion.model_id).delete()
    assert not ModelConversion.objects.exists()
    assert not jobs.job_heartbeat(kind=JOB_KINDS["conversions"], pk=conversion.pk, attempt=attempt)
    assert not complete(conversion, attempt)
