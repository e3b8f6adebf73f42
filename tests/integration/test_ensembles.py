"""Ensembles built on a real worker from real members: Nelder–Mead starves a deliberately
weak member and beats both the mean and the best member on validation; the exported single
Keras model reproduces the weighted sum of the members' predictions; greedy selection is
repeatable for a seed and reuses the cached member predictions."""

import io

import numpy as np
import pytest
from django.urls import reverse

from experiments.models import CachedPredictions, EnsembleMember, Study, TrainedModel, Trial
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.ensembles import ensemble_create
from experiments.services.trained_models import trained_models_request
from tests.conftest import wait_for
from tests.integration.helpers import digits, saved_study, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _fixed(name, value):
    return {"name": name, "type": "fixed", "value": value, "parent": None, "parent_values": []}


STRONG_SPACE = [_fixed("units", 64), _fixed("num_layers", 1),
                {"name": "learning_rate", "type": "choice", "values": [0.003, 0.01], "ordered": True,
                 "parent": None, "parent_values": []}]
# One epoch of plain SGD at a tiny learning rate: barely better than chance.
WEAK_SPACE = [_fixed("units", 8), _fixed("num_layers", 1), _fixed("optimizer", "sgd"), _fixed("learning_rate", 1e-4)]


def _refreshed(obj):
    obj.refresh_from_db()
    return obj


def _wait(obj, worker, active):
    wait_for(lambda: not active(_refreshed(obj)), timeout=400, what=f"{obj} to finish:\n{worker.log()[-3000:]}")


def _test_predictions(key: str) -> np.ndarray:
    row = CachedPredictions.objects.select_related("artifact").get(key=key)
    with np.load(io.BytesIO(artifact_read_bytes(artifact=row.artifact))) as npz:
        return npz["predictions"]


def test_ensembles_of_real_members(acme, alice, alice_client, start_worker, tmp_path):
    import keras

    worker = start_worker()
    data = digits(acme, alice)
    strong = started_study(acme, alice, data, name="strong", hypermodel="dense", search_space=STRONG_SPACE,
                           tuner="grid", max_trials=2, epochs=8, batch_size=32)
    weak = started_study(acme, alice, data, name="weak", hypermodel="dense", search_space=WEAK_SPACE,
                         tuner="grid", max_trials=1, epochs=1, batch_size=256)
    for study in (strong, weak):
        _wait(study, worker, lambda s: s.status == Study.Status.RUNNING)
        assert study.status == Study.Status.COMPLETED, study.message
    models = trained_models_request(study=strong, user=alice, trials=list(strong.trials.all()), method="promote",
                                    name="strong")
    for model in models:
        _wait(model, worker, lambda m: m.is_active)
        assert model.status == TrainedModel.Status.COMPLETED, model.error
    weak_trial = Trial.objects.get(study=weak)

    # Built from the browser's form: two promoted models and a weak trial checkpoint.
    response = alice_client.post(reverse("ensemble_new"), {
        "members": [f"model:{models[0].id}", f"model:{models[1].id}", f"trial:{weak_trial.id}"],
        "method": "nelder_mead", "name": "trio",
    })
    assert response.status_code == 302
    ensemble = TrainedModel.objects.get(name="trio")
    _wait(ensemble, worker, lambda m: m.is_active)
    assert ensemble.status == TrainedModel.Status.COMPLETED, ensemble.error

    weights = [m.weight for m in EnsembleMember.objects.filter(ensemble=ensemble).order_by("position")]
    assert sum(weights) == pytest.approx(1.0) and min(weights) >= 0
    assert weights[2] == min(weights), f"the weak member should weigh least: {weights}"
    comparison = ensemble.report["comparison"]
    assert comparison["ensemble"]["val"]["loss"] <= comparison["mean"]["val"]["loss"] + 1e-12
    assert comparison["ensemble"]["val"]["loss"] <= comparison["best_member"]["val"]["loss"] + 1e-12
    assert ensemble.test_metrics == comparison["ensemble"]["test"]
    assert len(ensemble.report["correlation"]) == 3

    # One model out: its predictions are the weighted sum of the members' (1e-5).
    download = alice_client.get(reverse("model_download", args=[ensemble.id, "keras"]))
    path = tmp_path / "trio.keras"
    path.write_bytes(b"".join(download.streaming_content))
    exported = keras.models.load_model(path)
    x_test = np.load(io.BytesIO(artifact_read_bytes(artifact=data.arrays)))["x_test"]
    members = [f"model:{models[0].id}:test", f"model:{models[1].id}:test", f"trial:{weak_trial.id}:test"]
    expected = sum(w * _test_predictions(key) for w, key in zip(weights, members, strict=True))
    np.testing.assert_allclose(exported.predict(x_test, verbose=0), expected, atol=1e-5)
    # Compiled like single models: evaluate works right after loading, and agrees with the page.
    y_test = np.load(io.BytesIO(artifact_read_bytes(artifact=data.arrays)))["y_test"]
    accuracy = exported.evaluate(x_test, y_test, verbose=0, return_dict=True)["accuracy"]
    assert accuracy == pytest.approx(ensemble.test_metrics["accuracy"], abs=1e-6)
    assert set(ensemble.files.values_list("format", flat=True)) == {"keras", "savedmodel", "tflite", "tflite_int8"}

    # The page says how the weights avoid leakage and shows the comparison and the charts.
    page = alice_client.get(reverse("model_detail", args=[ensemble.id])).content.decode()
    assert "never trained on the validation split" in page
    assert 'id="weights-chart"' in page and 'id="correlation-chart"' in page and "plotly" in page
    card = alice_client.get(reverse("model_card", args=[ensemble.id])).json()
    assert [m["weight"] for m in card["lineage"]["ensemble"]["members"]] == weights

    # Greedy selection: the same seed, the same weights; member predictions are reused, not recomputed.
    cached = CachedPredictions.objects.count()
    greedy = [ensemble_create(team=acme, user=alice, members=[*models, weak_trial], method="greedy", rounds=20,
                              seed=3, name="greedy") for _ in range(2)]
    for model in greedy:
        _wait(model, worker, lambda m: m.is_active)
        assert model.status == TrainedModel.Status.COMPLETED, model.error
    assert greedy[0].report["weights"] == greedy[1].report["weights"]
    assert CachedPredictions.objects.count() == cached == 6


def test_a_retrained_member_is_weighed_by_its_search_checkpoint(acme, alice):
    """No leakage: validation predictions of a retrained member come from the trial it was
    retrained from (trained on train only); its test predictions from the retrained model."""
    from workers.ensembles.build import _Member

    study = saved_study(acme, alice, digits(acme, alice), name="s")
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED, score=0.9)
    retrained, promoted = (TrainedModel.objects.create(team=acme, dataset=study.dataset, study=study, trial=trial,
                                                       name=f"m{i}", version=1, method=method, seed=1)
                           for i, method in enumerate(["retrain", "promote"]))
    ensemble = TrainedModel.objects.create(team=acme, dataset=study.dataset, kind="ensemble", name="e", version=1,
                                           method="mean", seed=0)
    rows = [EnsembleMember.objects.create(ensemble=ensemble, position=i, model=m)
            for i, m in enumerate([retrained, promoted])]
    rows.append(EnsembleMember.objects.create(ensemble=ensemble, position=2, trial=trial))
    keys = [(_Member(r, None).key("val"), _Member(r, None).key("test")) for r in rows]
    assert keys == [
        (f"trial:{trial.id}:val", f"model:{retrained.id}:test"),
        (f"model:{promoted.id}:val", f"model:{promoted.id}:test"),
        (f"trial:{trial.id}:val", f"trial:{trial.id}:test"),
    ]


def test_a_member_that_fails_to_load_fails_the_ensemble_with_a_message_and_no_files(acme, alice):
    """Run in this process (the worker's code path, no broker needed)."""
    from experiments.models import Artifact, ModelFile
    from experiments.services.artifacts import artifact_create
    from workers.jobs.trained_models import make_trained_model

    study = saved_study(acme, alice, digits(acme, alice), name="s")
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED, score=0.9)
    members = []
    for i in range(2):
        model = TrainedModel.objects.create(team=acme, dataset=study.dataset, study=study, trial=trial, name="m",
                                            version=i + 1, method="promote", seed=1, status="completed")
        broken = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="m.keras",
                                 fileobj=io.BytesIO(b"not a keras archive"))
        ModelFile.objects.create(model=model, format="keras", artifact=broken)
        members.append(model)
    ensemble = ensemble_create(team=acme, user=alice, members=members, method="mean")
    assert make_trained_model(model_pk=ensemble.pk) == "failed"
    ensemble.refresh_from_db()
    assert ensemble.status == TrainedModel.Status.FAILED
    assert ensemble.error.startswith("Member m v1 cannot be loaded")
    assert not ensemble.files.exists() and not CachedPredictions.objects.exists()
