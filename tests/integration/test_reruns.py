"""Re-run the best trial of a tiny study on a real worker (CPU, fixed seed): the re-run completes
outside the search, reproduces the trial's result, and both record the environment (dataset
hash and split, seed, versions, host, devices, the team hypermodel's code)."""

import hashlib
import socket
from pathlib import Path

import pytest
from django.urls import reverse

from experiments.models import Study, TrainedModel, Trial, TrialEpoch, TrialRerun, TrialRerunEpoch
from experiments.selectors.trial_reruns import trial_reruns
from experiments.selectors.trials import study_best_trial
from tests.conftest import ROOT, wait_for
from tests.integration.helpers import digits, started_study
from tests.web.pages import json_script, page_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

# On one CPU thread (the test workers' TUNEBOARD_TF_THREADS=1), with the same seed (weights and
# the tf.data shuffle), the same stored splits and the same code, TensorFlow's CPU kernels are
# deterministic: the re-run repeats the trial bit for bit. That is what this test measured
# (a difference of exactly 0.0 for the objective, every best-epoch metric and every epoch's
# logs), so it asserts equality rather than a tolerance that could hide a seed not reaching
# the run. (Several threads, or a GPU, may sum in another order: there a re-run differs in
# the last float32 digits, and the page shows by how much.)
TOLERANCE = 0.0


def _refreshed(obj):
    obj.refresh_from_db()
    return obj


def _finished_study(acme, alice, worker) -> Study:
    study = started_study(acme, alice, digits(acme, alice), name="repro digits", hypermodel="tiny", max_trials=3,
                          epochs=3, batch_size=64, patience=2, seed=11)
    wait_for(lambda: _refreshed(study).status != Study.Status.RUNNING, timeout=300,
             what=f"the study to finish; worker log:\n{worker.log()[-3000:]}")
    assert study.status == Study.Status.COMPLETED, study.message
    return study


def _check_environment(record: dict, *, study: Study, seed: int) -> None:
    dataset = study.dataset
    assert record["seed"] == seed
    assert record["dataset"]["sha256"] == dataset.arrays.sha256 and len(record["dataset"]["sha256"]) == 64
    assert record["dataset"]["split"] == {"seed": dataset.split_seed, "val_fraction": dataset.val_fraction,
                                          "test_fraction": dataset.test_fraction, "sizes": dataset.split_sizes}
    import keras
    import keras_tuner
    import numpy
    import tensorflow

    assert {name: record["versions"][name] for name in ("tensorflow", "keras", "keras-tuner", "numpy")} == {
        "tensorflow": tensorflow.__version__, "keras": keras.__version__, "keras-tuner": keras_tuner.__version__,
        "numpy": numpy.__version__}
    assert record["versions"]["python"] and record["versions"]["tuneboard"] not in ("", "missing")
    assert record["host"] == socket.gethostname()
    assert record["devices"]["kind"] == "cpu" and record["devices"]["names"] and record["devices"]["replicas"] == 1
    source = Path(ROOT / "tests" / "fixtures" / "hypermodels.py").read_bytes()
    assert record["hypermodel"] == {"name": "tiny", "team": True, "target": "tests.fixtures.hypermodels:build_tiny",
                                    "module": "tests.fixtures.hypermodels", "version": None,
                                    "source_sha256": hashlib.sha256(source).hexdigest()}


def test_a_rerun_of_the_best_trial_reproduces_it_and_both_record_their_environment(
        acme, alice, alice_client, start_worker):
    worker = start_worker()
    study = _finished_study(acme, alice, worker)
    best = study_best_trial(study=study)
    _check_environment(best.environment, study=study, seed=study.seed + best.number)
    assert best.environment["training"] == {"objective": "val_accuracy", "direction": "max", "epochs": 3,
                                            "initial_epoch": 0, "batch_size": 64, "patience": 2, "executions": 1}
    oracle_before = (study.oracle_state, study.oracle_version)

    response = alice_client.post(reverse("trial_rerun", args=[study.id, best.pk]))
    assert response.status_code == 302
    rerun = TrialRerun.objects.get(trial=best)
    wait_for(lambda: not _refreshed(rerun).is_active, timeout=240,
             what=f"the re-run to finish; worker log:\n{worker.log()[-3000:]}")
    assert rerun.status == TrialRerun.Status.COMPLETED, rerun.error

    # Outside the search: no new trial, the oracle untouched, the study still complete.
    study.refresh_from_db()
    assert Trial.objects.filter(study=study).count() == 3
    assert (study.oracle_state, study.oracle_version) == oracle_before and study.status == Study.Status.COMPLETED

    # Same seed, same settings, same split: the same result, epoch by epoch.
    _check_environment(rerun.environment, study=study, seed=best.environment["seed"])
    assert rerun.seed == best.environment["seed"]
    assert abs(rerun.score - best.score) <= TOLERANCE, (rerun.score, best.score)
    assert rerun.best_epoch == best.best_epoch
    assert rerun.metrics.keys() == best.metrics.keys()
    for name, value in best.metrics.items():
        if name in ("device_seconds", "seconds_per_epoch"):  # the run's wall time: never the same twice
            assert rerun.metrics[name] > 0
            continue
        assert abs(rerun.metrics[name] - value) <= TOLERANCE, (name, rerun.metrics[name], value)
    original_curve = [e.metrics for e in TrialEpoch.objects.filter(trial=best).order_by("epoch")]
    rerun_curve = [e.metrics for e in TrialRerunEpoch.objects.filter(rerun=rerun).order_by("epoch")]
    assert len(rerun_curve) == len(original_curve) >= 2
    for original, again in zip(original_curve, rerun_curve, strict=True):
        assert max(abs(again[k] - original[k]) for k in original) <= TOLERANCE

    (shown,) = trial_reruns(trial=best)
    comparison = shown.comparison
    assert comparison["objective"]["absolute"] <= TOLERANCE and comparison["best_epoch"]["identical"]
    assert comparison["same_environment"] and comparison["environment_differences"] == []
    page = alice_client.get(reverse("trial_detail", args=[study.id, best.pk]))
    assert f"Identical val_accuracy: {best.score:.4f} both times." in page_text(page)
    assert [s["name"] for s in json_script(page, "learning-curves")["series"]] == ["this trial", "re-run 1"]


def test_a_retrained_and_a_promoted_model_record_their_environment_in_the_row_and_the_model_card(
        acme, alice, alice_client, start_worker):
    worker = start_worker()
    study = _finished_study(acme, alice, worker)
    best = study_best_trial(study=study)
    for method in ("retrain", "promote"):
        alice_client.post(reverse("trial_models_request", args=[study.id, best.pk]), {
            "method": method, "epoch_source": "recorded", "epoch_cap": 5, "name": f"repro-{method}"})
    models = {model.method: model for model in TrainedModel.objects.filter(study=study)}
    for model in models.values():
        wait_for(lambda m=model: not _refreshed(m).is_active, timeout=300,
                 what=f"model {model} to finish; worker log:\n{worker.log()[-3000:]}")
        assert model.status == TrainedModel.Status.COMPLETED, model.error
    retrained, promoted = models["retrain"], models["promote"]
    _check_environment(retrained.environment, study=study, seed=retrained.seed)
    assert retrained.seed == best.environment["seed"] and "training" not in retrained.environment
    # A promoted model's weights are the trial's: its record is the trial's, plus where it was exported.
    assert promoted.environment == {**best.environment, "exported_on": {"host": socket.gethostname(),
                                                                        "versions": best.environment["versions"]}}
    card = alice_client.get(reverse("model_card", args=[retrained.id])).json()
    assert card["reproducibility"] == retrained.environment
    assert 'id="reproducibility"' in page_text(alice_client.get(reverse("model_detail", args=[retrained.id])))


def test_a_rerun_of_a_hyperband_trial_continues_from_the_same_checkpoint_and_matches(acme, alice, start_worker):
    from experiments.services.trial_reruns import trial_rerun_request

    worker = start_worker()
    study = started_study(acme, alice, digits(acme, alice), name="repro hyperband", hypermodel="tiny",
                          tuner="hyperband", max_trials=12, epochs=4, seed=5)
    wait_for(lambda: _refreshed(study).status != Study.Status.RUNNING, timeout=300,
             what=f"the study to finish; worker log:\n{worker.log()[-3000:]}")
    continued = (Trial.objects.filter(study=study, status=Trial.Status.COMPLETED,
                                      hyperparameters__has_key="tuner/trial_id")
                 .exclude(hyperparameters__contains={"tuner/initial_epoch": 0}).order_by("number").first())
    assert continued is not None, "no Hyperband round continued an earlier trial"
    rerun = trial_rerun_request(trial=continued, user=alice)
    wait_for(lambda: not _refreshed(rerun).is_active, timeout=240,
             what=f"the re-run to finish; worker log:\n{worker.log()[-3000:]}")
    assert rerun.status == TrialRerun.Status.COMPLETED, rerun.error
    # It trained the same epochs, from the parent's checkpoint, to the same result.
    original = list(TrialEpoch.objects.filter(trial=continued).order_by("epoch").values_list("epoch", "metrics"))
    again = list(TrialRerunEpoch.objects.filter(rerun=rerun).order_by("epoch").values_list("epoch", "metrics"))
    assert [e for e, _ in again] == [e for e, _ in original] and original[0][0] > 0
    assert abs(rerun.score - continued.score) <= TOLERANCE and rerun.best_epoch == continued.best_epoch
    assert rerun.environment["training"]["initial_epoch"] == continued.hyperparameters["tuner/initial_epoch"]
