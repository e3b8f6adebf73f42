"""The model page shows the step that makes SavedModel and TFLite from a model's .keras file on a
TensorFlow worker (the model trained where TensorFlow was missing): queued (and whether any worker
serves the cpu queue), running, failed with the reason, done; the downloads grow when the files
arrive, and the API shows the same step."""

import io
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import Artifact, ModelConversion, ModelFile, TrainedModel, Worker
from experiments.services.artifacts import artifact_create
from experiments.services.conversions import conversion_request
from tests.api.conftest import token_client
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db
PENDING = "Made later from the .keras file on a TensorFlow worker."


@pytest.fixture
def conversion(acme_model):
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature={
        "unavailable": dict.fromkeys(["savedmodel", "tflite", "tflite_int8"], PENDING)})
    return conversion_request(model=acme_model, formats=["savedmodel", "tflite", "tflite_int8"])


def step(client, model) -> str:
    page = page_text(client.get(reverse("model_detail", args=[model.id])))
    found = re.search(r'<li class="conversion[^"]*" id="model-conversion".*?</li>', page, re.S)
    assert found, "the page shows the conversion step"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(0))).strip()


def live(client, model) -> str:
    return page_text(client.get(reverse("model_live", args=[model.id])))


def test_a_model_with_every_format_shows_no_conversion_step(alice_client, acme_model):
    page = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    assert 'id="model-conversion"' not in page and "hx-trigger" not in live(alice_client, acme_model)


def test_a_queued_conversion_says_where_it_waits_and_that_no_worker_serves_the_cpu_queue(alice_client, acme_model,
                                                                                          conversion):
    text = step(alice_client, acme_model)
    assert text.startswith("SavedModel and TFLite made from the .keras file on a TensorFlow worker (cpu queue)")
    assert "queued" in text and "waiting for a worker of the cpu queue" in text
    assert "No live worker serves the cpu queue" in text
    page = live(alice_client, acme_model)
    assert 'hx-trigger="every 2s"' in page  # the page follows the step although the model is complete
    assert PENDING not in page  # the formats on their way are not listed as "not offered"
    Worker.objects.create(name="w1@host", hostname="host", pid=1, queues=["cpu"])
    assert "No live worker" not in step(alice_client, acme_model)


def test_a_running_conversion_names_its_worker(alice_client, acme_model, conversion):
    ModelConversion.objects.filter(pk=conversion.pk).update(status="running", worker_host="tf-host", attempts=1)
    text = step(alice_client, acme_model)
    assert "running being made on tf-host" in text and "No live worker" not in text


def test_a_failed_conversion_shows_the_reason_and_the_keras_file_stays(alice_client, acme_model, conversion):
    ModelConversion.objects.filter(pk=conversion.pk).update(status="failed", error="ValueError: bad file",
                                                            finished=timezone.now())
    text = step(alice_client, acme_model)
    assert "failed ValueError: bad file" in text and "The .keras file above is unaffected." in text
    page = live(alice_client, acme_model)
    assert "hx-trigger" not in page and reverse("model_download", args=[acme_model.id, "keras"]) in page


def test_a_completed_conversion_adds_its_downloads(alice_client, acme_model, conversion):
    artifact = artifact_create(team=acme_model.team, kind=Artifact.Kind.MODEL, filename="acme-model-v1-savedmodel.zip",
                               fileobj=io.BytesIO(b"PK zip"))
    ModelFile.objects.create(model=acme_model, format="savedmodel", artifact=artifact)
    ModelConversion.objects.filter(pk=conversion.pk).update(status="completed", worker_host="tf-host",
                                                            duration_seconds=3.2, unavailable={})
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature={"unavailable": {
        "tflite": "TFLite cannot hold this model.", "tflite_int8": "TFLite cannot hold this model."}})
    text = step(alice_client, acme_model)
    assert "done on tf-host in 3.2 s" in text
    page = live(alice_client, acme_model)
    assert reverse("model_download", args=[acme_model.id, "savedmodel"]) in page
    assert "not offered: TFLite cannot hold this model." in page and "hx-trigger" not in page


def test_the_api_shows_the_conversion_or_null(alice, acme_model):
    api = token_client(alice)
    url = reverse("api:model-detail", kwargs={"model_id": acme_model.id})
    assert api.get(url).json()["conversion"] is None
    conversion_request(model=acme_model, formats=["savedmodel", "tflite"])
    body = api.get(url).json()["conversion"]
    assert (body["status"], body["formats"], body["error"]) == ("queued", ["savedmodel", "tflite"], "")
    listed = api.get(reverse("api:model-list")).json()["results"]
    assert [m["conversion"]["status"] for m in listed] == ["queued"]
