"""Retrain the best trial of a finished study on a real worker, download every format
through the web, and load each one the way its users would."""

import io
import json
import zipfile

import numpy as np
import pytest
from django.urls import reverse

from experiments.models import ModelFile, Study, TrainedModel, TrainedModelEpoch
from experiments.selectors.job_logs import model_logs
from tests.conftest import wait_for
from tests.integration.helpers import digits, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

# Three 256-unit layers on digits' 64 features: ~150,000 parameters, so int8 weights show.
WIDE_SPACE = [
    {"name": "num_layers", "type": "fixed", "value": 3, "parent": None, "parent_values": []},
    {"name": "units", "type": "fixed", "value": 256, "parent": None, "parent_values": []},
    {"name": "learning_rate", "type": "choice", "values": [0.001, 0.003], "ordered": True, "parent": None,
     "parent_values": []},
]


def _finished_study(acme, alice, worker):
    study = started_study(acme, alice, digits(acme, alice), name="wide digits", hypermodel="dense",
                          search_space=WIDE_SPACE, max_trials=2, epochs=3, batch_size=64, tuner="grid")
    wait_for(lambda: _refreshed(study).status != Study.Status.RUNNING, timeout=300,
             what=f"the study to finish; worker log:\n{worker.log()[-3000:]}")
    assert study.status == Study.Status.COMPLETED, study.message
    return study


def _refreshed(obj):
    obj.refresh_from_db()
    return obj


def _wait_models(models, worker):
    for model in models:
        wait_for(lambda m=model: not _refreshed(m).is_active, timeout=400,
                 what=f"model {model} to finish; worker log:\n{worker.log()[-3000:]}")
        assert model.status == TrainedModel.Status.COMPLETED, model.error


def _download(client, model, fmt, tmp_path):
    response = client.get(reverse("model_download", args=[model.id, fmt]))
    assert response.status_code == 200
    assert response.streaming, "downloads are streamed"
    body = b"".join(response.streaming_content)
    file = model.files.get(format=fmt)
    assert len(body) == int(response["Content-Length"]) == file.artifact.size
    assert response["X-Content-SHA256"] == file.artifact.sha256
    path = tmp_path / file.artifact.filename
    path.write_bytes(body)
    return path


def _test_split(study):
    from experiments.selectors.artifacts import artifact_read_bytes

    with np.load(io.BytesIO(artifact_read_bytes(artifact=study.dataset.arrays))) as npz:
        return npz["x_test"], npz["y_test"]


def _tflite_predict(path, x):
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_path=str(path))
    interpreter.resize_tensor_input(interpreter.get_input_details()[0]["index"], x.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def test_retrain_the_best_trial_and_load_every_download(acme, alice, alice_client, start_worker, tmp_path):
    import keras
    import tensorflow as tf

    worker = start_worker()
    study = _finished_study(acme, alice, worker)
    response = alice_client.post(reverse("study_models_request", args=[study.id]), {
        "top_n": 1, "method": "retrain", "epoch_source": "detect", "epoch_cap": 12, "name": "wide-digits",
    })
    assert response.status_code == 302
    model = TrainedModel.objects.get(study=study)
    _wait_models([model], worker)

    # The recipe: best epoch detected on train/validation, then 1.2x that on train+validation.
    detect = TrainedModelEpoch.objects.filter(model=model, phase="best_epoch").order_by("epoch")
    val_losses = [row.metrics["val_loss"] for row in detect]
    assert model.best_epoch == int(np.argmin(val_losses)) + 1
    assert model.epochs == max(1, int(model.best_epoch * 1.2))
    assert TrainedModelEpoch.objects.filter(model=model, phase="retrain").count() == model.epochs
    # The model's log has an epoch line for each epoch of both phases (detect, then retrain). The
    # job completes inside its run; the log's last write follows a moment later.
    log = wait_for(lambda: next((entry for entry in model_logs(model) if not entry.running), None), timeout=30,
                   what="the model's log to close")
    assert log.text().count(" epoch 1: ") == 2
    # Its device time: the run's wall time on the one CPU its worker child held, written before the log closed.
    model.refresh_from_db()
    assert model.device_kind == "cpu" and model.device_seconds >= model.duration_seconds > 0
    assert set(model.test_metrics) == {"loss", "accuracy"} and set(model.val_metrics) >= {"loss", "accuracy"}
    # Sane on unseen rows: digits has pixels that are constant in training (normalisation must not explode).
    assert model.test_metrics["loss"] < 2.0 and model.test_metrics["accuracy"] > 0.8
    assert set(model.files.values_list("format", flat=True)) == set(ModelFile.Format.values)

    x_test, y_test = _test_split(study)

    # .keras: reloading reproduces the stored test metrics on the test split.
    reloaded = keras.models.load_model(_download(alice_client, model, "keras", tmp_path))
    assert reloaded.count_params() >= 100_000
    metrics = reloaded.evaluate(x_test, y_test, batch_size=study.batch_size, return_dict=True, verbose=0)
    assert metrics["accuracy"] == pytest.approx(model.test_metrics["accuracy"], abs=1e-6)
    assert metrics["loss"] == pytest.approx(model.test_metrics["loss"], abs=1e-6)
    expected = reloaded.predict(x_test, verbose=0)

    # SavedModel in TF Serving's layout <name>/<version>/, same predictions from serving_default.
    archive = zipfile.ZipFile(_download(alice_client, model, "savedmodel", tmp_path))
    assert "wide-digits/1/saved_model.pb" in archive.namelist()
    archive.extractall(tmp_path / "serving")
    serving = tf.saved_model.load(str(tmp_path / "serving" / "wide-digits" / "1")).signatures["serving_default"]
    (input_name,) = serving.structured_input_signature[1]
    (output,) = serving(**{input_name: tf.constant(x_test)}).values()
    np.testing.assert_allclose(output.numpy(), expected, atol=1e-5)

    # TFLite, float and dynamic-range int8: both run; int8 is at most a third of the size.
    float_path = _download(alice_client, model, "tflite", tmp_path)
    int8_path = _download(alice_client, model, "tflite_int8", tmp_path)
    np.testing.assert_allclose(_tflite_predict(float_path, x_test), expected, atol=1e-4)
    int8_predictions = _tflite_predict(int8_path, x_test)
    assert int8_predictions.shape == expected.shape
    assert (int8_predictions.argmax(1) == expected.argmax(1)).mean() > 0.9
    assert int8_path.stat().st_size <= float_path.stat().st_size / 3

    # The model card: lineage, metrics, dataset and split, preprocessing, signature, versions, hashes.
    card = json.loads(alice_client.get(reverse("model_card", args=[model.id])).content)
    assert card["lineage"]["trial"]["id"] == model.trial.trial_id
    assert card["hyperparameters"]["units"] == 256
    assert card["metrics"]["test"] == model.test_metrics
    assert card["dataset"]["split"]["sizes"] == study.dataset.split_sizes
    assert "Normalization layer" in card["preprocessing"]
    assert card["signature"]["serving"]["inputs"][0]["shape"] == [None, 64]
    assert card["package_versions"]["tensorflow"] == tf.__version__
    assert {f["format"]: f["sha256"] for f in card["files"]} == {
        f.format: f.artifact.sha256 for f in model.files.select_related("artifact")
    }

    # The model page shows the metrics and every download.
    page = alice_client.get(reverse("model_detail", args=[model.id])).content.decode()
    assert f"{model.test_metrics['accuracy']:.4f}" in page
    for fmt in ModelFile.Format.values:
        assert reverse("model_download", args=[model.id, fmt]) in page


def test_promote_recorded_epoch_and_repeatable_detection(acme, alice, alice_client, start_worker):
    from experiments.services.trained_models import trained_models_request

    worker = start_worker()
    study = _finished_study(acme, alice, worker)
    best = study.trials.order_by("-score").first()
    requests = [("promote", "detect"), ("retrain", "recorded"), ("retrain", "detect"), ("retrain", "detect")]
    models = [
        trained_models_request(study=study, user=alice, trials=[best], method=method, epoch_source=source,
                               epoch_cap=8, name="variants")[0]
        for method, source in requests
    ]
    assert [m.version for m in models] == [1, 2, 3, 4]
    _wait_models(models, worker)
    promoted, recorded, first, second = models
    # Promoting trains nothing: the trial's best-epoch weights, as found during the search.
    assert promoted.epochs == best.best_epoch and not promoted.epoch_rows.exists()
    assert promoted.val_metrics["accuracy"] == pytest.approx(best.metrics["val_accuracy"], abs=1e-6)
    # The recorded best epoch is reused, not detected again.
    assert recorded.best_epoch == best.best_epoch
    assert recorded.epochs == max(1, int(best.best_epoch * 1.2))
    assert not recorded.epoch_rows.filter(phase="best_epoch").exists()
    # Same trial, same seed: the same best epoch and the same validation curve.
    assert first.seed == second.seed
    assert first.best_epoch == second.best_epoch
    assert first.val_metrics == pytest.approx(second.val_metrics, abs=1e-6)
