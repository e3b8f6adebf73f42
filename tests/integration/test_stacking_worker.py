"""A stacking ensemble built on a real worker from the browser's form: the meta-learner's
strength is chosen by CV on validation predictions (its table on the page, and the same
table refitted here from the cached validation predictions alone), the members' page
weights are shares of its coefficients, and the downloaded `.keras` file (safe mode, no
custom code) reproduces the page's test metrics."""

import io

import numpy as np
import pytest
from django.urls import reverse

from experiments.models import EnsembleMember, Study, TrainedModel, Trial
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.trained_models import trained_models_request
from tests.integration.helpers import digits, started_study
from tests.integration.test_ensembles import STRONG_SPACE, WEAK_SPACE, _wait
from tests.integration.test_ensembles import _test_predictions as _cached_predictions
from workers.ensembles import blending
from workers.ensembles.stacking import fit_stacking

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def test_a_stacking_ensemble_of_real_members(acme, alice, alice_client, start_worker, tmp_path):
    import keras

    worker = start_worker()
    data = digits(acme, alice)
    strong = started_study(acme, alice, data, name="strong", hypermodel="dense", search_space=STRONG_SPACE,
                           tuner="grid", max_trials=2, epochs=4, batch_size=32)
    weak = started_study(acme, alice, data, name="weak", hypermodel="dense", search_space=WEAK_SPACE,
                         tuner="grid", max_trials=1, epochs=1, batch_size=256)
    for study in (strong, weak):
        _wait(study, worker, lambda s: s.status == Study.Status.RUNNING)
        assert study.status == Study.Status.COMPLETED, study.message
    (model,) = trained_models_request(study=strong, user=alice, trials=list(strong.trials.all())[:1],
                                      method="promote", name="strong")
    _wait(model, worker, lambda m: m.is_active)
    assert model.status == TrainedModel.Status.COMPLETED, model.error
    others = [*Trial.objects.filter(study=strong).exclude(pk=model.trial_id), Trial.objects.get(study=weak)]

    response = alice_client.post(reverse("ensemble_new"), {
        "members": [f"model:{model.id}", *[f"trial:{t.id}" for t in others]], "method": "stacking", "name": "stack",
    })
    assert response.status_code == 302
    ensemble = TrainedModel.objects.get(name="stack")
    _wait(ensemble, worker, lambda m: m.is_active)
    assert ensemble.status == TrainedModel.Status.COMPLETED, ensemble.error

    meta = ensemble.report["meta_learner"]
    assert meta["kind"] == "logistic_regression"
    # Tuneboard's members end in a Dense softmax, so both feature kinds were tried on CV.
    assert meta["features"] == min(meta["features_cv"], key=meta["features_cv"].get)
    assert set(meta["features_cv"]) == {"probabilities", "log_probabilities"}
    assert meta["strength"] == min(meta["cv"], key=lambda row: row["loss"])["strength"]
    assert ensemble.report["fit"]["val_loss_in_sample"] is True
    weights = [m.weight for m in EnsembleMember.objects.filter(ensemble=ensemble).order_by("position")]
    assert weights == pytest.approx(meta["member_shares"]) and sum(weights) == pytest.approx(1.0)
    assert ensemble.report["export_max_abs_difference"] < 1e-5

    # The meta-learner is what the validation predictions alone give: refitted here from the
    # cached validation predictions and y_val, the same CV table, strength and features.
    arrays = np.load(io.BytesIO(artifact_read_bytes(artifact=data.arrays)))
    keys = [f"model:{model.id}:val", *[f"trial:{t.id}:val" for t in others]]
    again = fit_stacking(np.stack([_cached_predictions(key) for key in keys]), arrays["y_val"], "classification",
                         seed=ensemble.seed).as_report()
    assert [row["strength"] for row in again["cv"]] == [row["strength"] for row in meta["cv"]]
    assert [row["loss"] for row in again["cv"]] == pytest.approx([row["loss"] for row in meta["cv"]])
    assert again["strength"] == meta["strength"]
    assert again["features"] == meta["features"]

    # The downloaded file alone (safe mode: no custom code) gives the page's test figures.
    download = alice_client.get(reverse("model_download", args=[ensemble.id, "keras"]))
    path = tmp_path / "stack.keras"
    path.write_bytes(b"".join(download.streaming_content))
    exported = keras.models.load_model(path)
    figures = blending.metrics(exported.predict(arrays["x_test"], verbose=0).astype("float64"), arrays["y_test"],
                                "classification")
    assert figures["accuracy"] == ensemble.test_metrics["accuracy"]
    assert figures["log_loss"] == pytest.approx(ensemble.test_metrics["loss"], abs=1e-5)
    assert set(ensemble.files.values_list("format", flat=True)) == {"keras", "savedmodel", "tflite", "tflite_int8"}

    page = alice_client.get(reverse("model_detail", args=[ensemble.id])).content.decode()
    assert 'id="meta-learner-cv"' in page and "chosen" in page and "validation predictions only" in page
    assert 'id="weights-meaning"' in page and "on log-probabilities" in page
