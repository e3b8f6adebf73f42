"""Quantized variants through the model page and the API (no worker: what the web process does). A request
queues one job on the queue its method needs; bad input and unfinished models are refused with the same
message on both and queue nothing; made variants show their figures beside the float model's with a warning
past the threshold, in the model card too, and download; viewers see but cannot ask; other teams get 404."""

import io
import json

import pytest
from django.urls import reverse

from experiments.models import Artifact, ModelVariant, TrainedModel
from experiments.services.artifacts import artifact_create
from experiments.services.variants import FULL_INTEGER_METHODS
from tests.api.conftest import token_client
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db
FILE = b"TFL3 pretend flatbuffer" * 10


@pytest.fixture
def sent(monkeypatch):
    """The tasks sent to the broker once their transaction commits, as (task name, args, queue)."""
    messages = []
    monkeypatch.setattr("experiments.services.queueing.current_app.send_task",
                        lambda task, args, queue, countdown=None: messages.append((task, args, queue)))
    return messages


def _figures(float_accuracy: float, variant_accuracy: float) -> dict:
    return {"float": {"metrics": {"accuracy": float_accuracy, "log_loss": 0.30}, "size_bytes": 98_000,
                      "latency_ms_batch1": 0.20, "latency_ms_batch64": 0.02},
            "variant": {"metrics": {"accuracy": variant_accuracy, "log_loss": 0.31}, "size_bytes": 32_000,
                        "latency_ms_batch1": 0.10, "latency_ms_batch64": 0.01}}


@pytest.fixture
def made(acme, acme_model):
    return ModelVariant.objects.create(
        model=acme_model, method=ModelVariant.Method.TFLITE_FULL_INTEGER, queue="cpu", status="completed",
        runtime="LiteRT", figures=_figures(0.95, 0.90), worker_host="w1",
        artifact=artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="acme-model-v1-int8-full.tflite",
                                 fileobj=io.BytesIO(FILE)))


def test_an_editor_asks_for_a_variant_on_the_page_and_it_is_queued_where_its_method_runs(
        alice_client, acme_model, sent, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(reverse("model_variant_request", args=[acme_model.id]),
                                     {"method": "keras_int8"}, follow=True)
        alice_client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": "tflite_int8_full"})
    assert "Keras int8 (.keras) of acme-model v1: queued" in page_text(response)
    variants = list(ModelVariant.objects.order_by("id").values_list("method", "queue", "status"))
    assert variants == [("keras_int8", "cpu", "queued"), ("tflite_int8_full", "cpu", "queued")]
    assert [(task, queue) for task, _args, queue in sent] == [("workers.tasks.quantize_model", "cpu")] * 2
    assert 'id="model-live" hx-get' in response.content.decode(), "the page follows the variants being made"


def test_a_keras_variant_of_a_gpu_model_goes_to_the_gpu_queue_and_tflite_to_the_cpu_one(alice_client, acme_model,
                                                                                          sent):
    acme_model.study.queue = "gpu"
    acme_model.study.save(update_fields=["queue"])
    for method in ("keras_float8", "tflite_dynamic"):
        alice_client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": method})
    assert dict(ModelVariant.objects.values_list("method", "queue")) == {"keras_float8": "gpu",
                                                                         "tflite_dynamic": "cpu"}


@pytest.mark.parametrize(("data", "message"), [
    ({"method": "int4"}, "Select a valid choice. int4 is not one of the available choices."),
    ({}, "This field is required."),
])
def test_bad_input_is_refused_with_the_same_message_on_the_page_and_the_api(alice_client, alice, acme_model, data,
                                                                              message):
    page = alice_client.post(reverse("model_variant_request", args=[acme_model.id]), data, follow=True)
    assert message in page_text(page)
    api = token_client(alice).post(reverse("api:model-variants", args=[acme_model.id]), data, format="json")
    assert api.status_code == 400 and message in json.dumps(api.json())
    assert not ModelVariant.objects.exists()


def test_a_model_still_training_cannot_be_quantized_yet(alice_client, alice, acme_model):
    TrainedModel.objects.filter(pk=acme_model.pk).update(status=TrainedModel.Status.RUNNING)
    message = "has not finished training (running); it can be quantized once it has completed."
    page = alice_client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": "keras_int8"},
                             follow=True)
    assert message in page_text(page)
    api = token_client(alice).post(reverse("api:model-variants", args=[acme_model.id]), {"method": "keras_int8"},
                                   format="json")
    assert api.status_code == 400 and message in json.dumps(api.json())
    assert not ModelVariant.objects.exists()


def test_a_made_variant_shows_its_figures_beside_the_float_models_with_a_warning_past_the_threshold(
        alice_client, acme_model, made, settings):
    settings.QUANTIZATION_WARN_ACCURACY_DROP = 0.01
    text = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    assert "TFLite full-integer int8 (input and output types as in the float model)" in text
    assert "0.9500 → <strong>0.9000</strong>" in text and "(×0.33)" in text, "beside the float model's"
    assert "scored with LiteRT&#x27;s interpreter (ai-edge-litert)" in text
    assert "Test accuracy drops by 5.0 points (more than 1 point)" in text
    settings.QUANTIZATION_WARN_ACCURACY_DROP = 0.1
    assert "drops by" not in page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    card = alice_client.get(reverse("model_card", args=[acme_model.id])).json()
    (variant,) = card["quantized_variants"]
    assert variant["metrics"]["accuracy"] == {"float": 0.95, "variant": 0.90}
    assert variant["size_bytes"]["ratio"] == pytest.approx(32 / 98)


def test_a_made_variant_downloads_on_the_page_and_through_the_api(alice_client, alice, acme_model, made):
    page = alice_client.get(reverse("model_variant_download", args=[acme_model.id, made.id]))
    assert page.status_code == 200 and b"".join(page.streaming_content) == FILE
    assert page["Content-Disposition"] == 'attachment; filename="acme-model-v1-int8-full.tflite"'
    api = token_client(alice)
    (listed,) = api.get(reverse("api:model-variants", args=[acme_model.id])).json()
    assert (listed["method"], listed["summary"]["metrics"]["accuracy"]["variant"]) == ("tflite_int8_full", 0.90)
    assert b"".join(api.get(listed["download"]).streaming_content) == FILE


def test_a_variant_not_yet_made_has_no_download(alice_client, acme_model):
    queued = ModelVariant.objects.create(model=acme_model, method="keras_int8", queue="cpu")
    assert alice_client.get(reverse("model_variant_download", args=[acme_model.id, queued.id])).status_code == 404


def test_the_api_queues_a_variant_and_a_second_request_returns_it(alice, acme_model, sent):
    api = token_client(alice)
    first = api.post(reverse("api:model-variants", args=[acme_model.id]), {"method": "tflite_dynamic"},
                     format="json")
    assert first.status_code == 202 and first.json()["status"] == "queued"
    again = api.post(reverse("api:model-variants", args=[acme_model.id]), {"method": "tflite_dynamic"},
                     format="json")
    assert again.json()["id"] == first.json()["id"] and ModelVariant.objects.count() == 1


def test_a_viewer_sees_variants_but_cannot_ask_for_one(client, bob, acme_model, made):
    client.force_login(bob)
    page = client.get(reverse("model_detail", args=[acme_model.id]))
    assert "acme-model-v1-int8-full.tflite" in page_text(page) and 'id="variant-form"' not in page.content.decode()
    assert client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": "keras_int8"}
                       ).status_code == 403
    assert client.post(reverse("model_variant_cancel", args=[acme_model.id, made.id])).status_code == 403
    assert token_client(bob).post(reverse("api:model-variants", args=[acme_model.id]), {"method": "keras_int8"},
                                  format="json").status_code == 403
    assert ModelVariant.objects.count() == 1


def test_another_team_gets_404_on_every_variant_route_and_nothing_is_queued(client, charlie, acme_model, made):
    client.force_login(charlie)
    assert client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": "keras_int8"}
                       ).status_code == 404
    running = ModelVariant.objects.create(model=acme_model, method="keras_int8", queue="cpu", status="running")
    assert client.post(reverse("model_variant_cancel", args=[acme_model.id, running.id])).status_code == 404
    assert token_client(charlie).post(reverse("api:model-variant-cancel", args=[acme_model.id, running.id])
                                      ).status_code == 404
    assert ModelVariant.objects.get(pk=running.pk).status == "running"
    running.delete()
    assert client.get(reverse("model_variant_download", args=[acme_model.id, made.id])).status_code == 404
    api = token_client(charlie)
    assert api.get(reverse("api:model-variants", args=[acme_model.id])).status_code == 404
    assert api.post(reverse("api:model-variants", args=[acme_model.id]), {"method": "keras_int8"},
                    format="json").status_code == 404
    assert api.get(reverse("api:model-variant-download", args=[acme_model.id, made.id])).status_code == 404
    assert ModelVariant.objects.count() == 1


def test_a_queued_variant_is_cancelled_on_the_page_and_in_the_api_and_the_page_says_no_worker_serves_its_queue(
        alice_client, alice, acme_model):
    queued = ModelVariant.objects.create(model=acme_model, method="keras_int8", queue="gpu-jax")
    page = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    assert "No live worker serves the gpu-jax queue" in page
    response = alice_client.post(reverse("model_variant_cancel", args=[acme_model.id, queued.id]), follow=True)
    assert "Keras int8 (.keras) of acme-model v1 cancelled." in page_text(response)
    assert ModelVariant.objects.get(pk=queued.pk).status == "cancelled"
    api = token_client(alice)
    ended = api.post(reverse("api:model-variant-cancel", args=[acme_model.id, queued.id]))
    assert ended.status_code == 409 and "already ended (cancelled)" in json.dumps(ended.json())
    again = api.post(reverse("api:model-variants", args=[acme_model.id]), {"method": "keras_int8"}, format="json")
    assert again.status_code == 202 and again.json()["id"] != queued.id, "a cancelled variant may be asked again"
    assert api.post(reverse("api:model-variant-cancel", args=[acme_model.id, again.json()["id"]])
                    ).json()["status"] == "cancelled"


def test_variants_a_model_cannot_have_are_refused_before_any_work(alice_client, alice, acme_model):
    acme_model.study.hypermodel = "sequence"
    acme_model.study.save(update_fields=["hypermodel"])
    TrainedModel.objects.filter(pk=acme_model.pk).update(hyperparameters={"layer_type": "lstm", "units": 8})
    for method in FULL_INTEGER_METHODS:
        page = alice_client.post(reverse("model_variant_request", args=[acme_model.id]), {"method": method},
                                 follow=True)
        assert "No full-integer TFLite file for a model with recurrent layers" in page_text(page), method
    acme_model.dataset.kind = "text"
    acme_model.dataset.save(update_fields=["kind"])
    api = token_client(alice).post(reverse("api:model-variants", args=[acme_model.id]),
                                   {"method": "tflite_dynamic"}, format="json")
    assert api.status_code == 400 and "TFLite cannot hold a text model" in json.dumps(api.json())
    assert not ModelVariant.objects.exists()


def test_a_made_variant_is_registered_from_the_model_page_and_the_api_and_a_wrong_one_is_refused(
        alice_client, alice, acme_model, made):
    from experiments.models import ModelVersion
    from tests.web.registry_rows import signature

    TrainedModel.objects.filter(pk=acme_model.pk).update(signature=signature())
    page = alice_client.get(reverse("model_detail", args=[acme_model.id])).content.decode()
    assert f'<option value="{made.id}">its TFLite full-integer int8' in page
    response = alice_client.post(reverse("model_register", args=[acme_model.id]), {"name": "edge", "variant": made.id},
                                 follow=True)
    registry_page = page_text(response)
    assert ("The TFLite full-integer int8 (input and output types as in the float model) variant of "
            f"{acme_model} is now version 1 of edge.") in registry_page
    assert "TFLite full-integer int8 (input and output types as in the float model)" in registry_page, \
        "the registry page names it"
    assert "0.9000" in registry_page and "0.8750" not in registry_page, "the variant's test figure, not the model's"
    model_page = page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))
    assert "its TFLite full-integer int8 (input and output types as in the float model) variant" in model_page
    api = token_client(alice)
    refused = api.post(reverse("api:registry-list"), {"name": "edge", "model": acme_model.id, "variant": made.id + 99},
                       format="json")
    assert refused.status_code == 400 and f"has no made quantized variant {made.id + 99}" in json.dumps(refused.json())
    float_version = api.post(reverse("api:registry-list"), {"name": "edge", "model": acme_model.id}, format="json")
    assert float_version.status_code == 201 and float_version.json()["variant"] is None
    assert list(ModelVersion.objects.order_by("version").values_list("variant_id", flat=True)) == [made.id, None]


def test_a_batch_prediction_uses_a_made_variant_asked_for_or_the_registry_versions(
        alice_client, alice, acme, acme_model, made, sent):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from experiments.models import PredictionJob
    from experiments.services.registry import registry_register
    from tests.web.registry_rows import signature

    rows = "sepal length (cm),sepal width (cm),petal length (cm),petal width (cm)\n5.1,3.5,1.4,0.2\n"
    page = alice_client.get(reverse("model_detail", args=[acme_model.id])).content.decode()
    assert f'<option value="{made.id}">its TFLite full-integer' in page.split('id="predict-variant"')[1]
    response = alice_client.post(reverse("model_predict", args=[acme_model.id]),
                                 {"file": SimpleUploadedFile("x.csv", rows.encode()), "variant": made.id})
    job = PredictionJob.objects.get()
    queued = page_text(alice_client.get(response.url))  # the message shows once
    assert job.variant_id == made.id
    assert f"Queued prediction {job.pk}: {job.rows} rows with the TFLite full-integer" in queued
    api = token_client(alice)
    refused = api.post(reverse("api:prediction-list"), {"model": acme_model.id, "variant": 999,
                                                        "file": SimpleUploadedFile("x.csv", rows.encode())})
    assert refused.status_code == 400 and "has no made quantized variant 999" in json.dumps(refused.json())
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature=signature())
    acme_model.refresh_from_db()
    registry_register(team=acme, model=acme_model, name="edge", user=alice, variant_id=made.id)
    by_alias = api.post(reverse("api:prediction-list"), {"reference": "edge/1",
                                                         "file": SimpleUploadedFile("x.csv", rows.encode())})
    assert by_alias.status_code == 202 and by_alias.json()["variant"] == made.id
    acme_model.study.backend = "jax"
    acme_model.study.save(update_fields=["backend"])
    on_jax = api.post(reverse("api:prediction-list"), {"model": acme_model.id, "variant": made.id,
                                                       "file": SimpleUploadedFile("x.csv", rows.encode())})
    assert on_jax.status_code == 400 and "no TFLite runtime" in json.dumps(on_jax.json())
    page = alice_client.get(reverse("model_detail", args=[acme_model.id])).content.decode()
    choices = page.split('id="predict-variant"')[1].split("</select>")[0]
    assert 'id="predict-variant-jax"' in page and f'<option value="{made.id}">' not in choices
    assert PredictionJob.objects.count() == 2
