"""A quantized variant from the model page, in a real Chromium: an editor picks a variant and asks for it, the
page shows it queued and follows it (no reload) until the worker's completion puts its figures beside the float
model's, with its download and a warning past the threshold; no htmx error on the way. The job is moved to its
end through the services a worker calls (no worker: fast and deterministic)."""

import io

import pytest
from django.utils import timezone

from experiments.models import Artifact, ModelFile, ModelVariant, TrainedModel, Trial
from experiments.services import jobs
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.variants import variant_complete
from tests.browser.test_pages_follow_jobs import open_as_alice
from tests.integration.helpers import saved_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_editor_asks_for_a_variant_and_the_page_shows_its_figures_when_made(live_server, page, acme, alice,
                                                                               settings, screenshot):
    settings.QUANTIZATION_WARN_ACCURACY_DROP = 0.01
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"), name="s")
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED, score=0.9)
    model = TrainedModel.objects.create(team=acme, dataset=study.dataset, study=study, trial=trial, name="iris-mlp",
                                        version=1, method="retrain", seed=1, status="completed",
                                        test_metrics={"accuracy": 0.95}, finished=timezone.now())
    ModelFile.objects.create(model=model, format="keras", artifact=artifact_create(
        team=acme, kind=Artifact.Kind.MODEL, filename="iris-mlp-v1.keras", fileobj=io.BytesIO(b"PK")))
    errors = open_as_alice(page, live_server, f"/models/{model.id}/")
    page.select_option("#id_method", "tflite_dynamic")
    page.click("#request-variant")
    page.wait_for_selector("tr.variant-queued")
    assert "TFLite dynamic-range int8 of iris-mlp v1: queued" in page.inner_text(".flash-success")
    page.fill("#register-name", "typed-while-it-is-made")
    variant = ModelVariant.objects.get()
    attempt = jobs.job_claim(kind=JOB_KINDS["variants"], pk=variant.pk, worker_host="w").attempts
    figures = {side: {"metrics": {"accuracy": accuracy, "log_loss": 0.2}, "size_bytes": size,
                      "latency_ms_batch1": 0.2, "latency_ms_batch64": 0.02}
               for side, accuracy, size in (("float", 0.95, 9000), ("variant", 0.90, 3000))}
    assert variant_complete(variant_pk=variant.pk, attempt=attempt, figures=figures, runtime="LiteRT",
                            duration_seconds=1.0, artifact=artifact_create(
                                team=acme, kind=Artifact.Kind.MODEL, filename="iris-mlp-v1-dynamic-int8.tflite",
                                fileobj=io.BytesIO(b"TFL3")))
    page.wait_for_selector("tr.variant-completed", timeout=15_000)
    row = page.inner_text("tr.variant-completed")
    assert "0.9500 → 0.9000" in row and "(×0.33)" in row and "iris-mlp-v1-dynamic-int8.tflite" in row
    assert "Test accuracy drops by 5.0 points" in page.inner_text(".variant-warning")
    assert page.get_attribute("#model-live", "hx-get") is None, "the page stops polling once nothing is active"
    # The forms outside the polled part offer the new variant without a reload (swapped in out of band).
    page.wait_for_selector(f'#predict-variant option[value="{variant.pk}"]', state="attached", timeout=5_000)
    assert page.locator(f'#register-variant option[value="{variant.pk}"]').count() == 1
    assert page.input_value("#register-name") == "typed-while-it-is-made", "the rest of the form is left as typed"
    screenshot("variant-made")
    assert not errors, errors
