"""`tuneboard models quantize` and `tuneboard models variants` against a live server: the request, its
refusal in the API's words, the figures beside the float model's, and the checked download."""

import io

import pytest

if not __import__("django.conf").conf.settings.configured:  # run with -p no:django: unit tests only
    pytest.skip("needs pytest-django (the live server and the test database)", allow_module_level=True)

from tuneboard_client.variants import VARIANT_METHODS  # noqa: E402

from experiments.models import Artifact, ModelVariant, ModelVersion, TrainedModel  # noqa: E402
from experiments.services.artifacts import artifact_create  # noqa: E402
from tests.web.conftest import acme_dataset, acme_model, acme_study, acme_trial  # noqa: E402,F401
from tests.web.registry_rows import signature  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_quantize_and_list_variants_from_the_command_line(acme, acme_model, live_tuneboard, tmp_path):  # noqa: F811
    tuneboard = live_tuneboard
    queued = tuneboard("models", "quantize", acme_model.id, "--method", "keras_int8", "--no-wait")
    assert "keras_int8" in queued and "queued" in queued
    refused = tuneboard("models", "quantize", acme_model.id, "--method", "int4", code=1)
    assert "Unknown --method 'int4'" in refused
    assert VARIANT_METHODS == tuple(ModelVariant.Method.values), "the CLI offers every method the server makes"
    variant = ModelVariant.objects.get()
    ModelVariant.objects.filter(pk=variant.pk).update(
        status="completed", runtime="Keras",
        figures={"float": {"metrics": {"accuracy": 0.95}, "size_bytes": 1000, "latency_ms_batch1": 0.2,
                           "latency_ms_batch64": 0.02},
                 "variant": {"metrics": {"accuracy": 0.9}, "size_bytes": 400, "latency_ms_batch1": 0.1,
                             "latency_ms_batch64": 0.01}},
        artifact=artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="acme-model-v1-int8.keras",
                                 fileobj=io.BytesIO(b"PK int8")))
    listed = tuneboard("models", "variants", acme_model.id)
    assert "0.95 -> 0.9" in listed and "1000 -> 400" in listed and "Test accuracy drops by 5.0 points" in listed
    made = tuneboard("models", "quantize", acme_model.id, "--method", "keras_int8", "--out", tmp_path / "edge")
    assert "Saved" in made and (tmp_path / "edge" / "acme-model-v1-int8.keras").read_bytes() == b"PK int8"
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature=signature())
    registered = tuneboard("register", acme_model.id, "--as", "edge", "--variant", variant.pk)
    assert registered.strip() == f"{acme_model}'s keras_int8 variant is now version 1 of edge."
    assert ModelVersion.objects.get().variant_id == variant.pk
    TrainedModel.objects.filter(pk=acme_model.pk).update(status="running")
    unfinished = tuneboard("models", "quantize", acme_model.id, "--method", "tflite_dynamic", code=1)
    assert "it can be quantized once it has completed" in unfinished
