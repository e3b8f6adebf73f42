"""The `tuneboard` command end to end: a live server, a real worker, a personal API token.
Add iris, create a study from a YAML file and start it, watch it to the end, retrain the
best trial, ensemble it with a trial checkpoint, download the SavedModel and load it."""

import json

import numpy as np
import pytest

if not __import__("django.conf").conf.settings.configured:  # run with -p no:django: unit tests only
    pytest.skip("needs pytest-django (the live server and the test database)", allow_module_level=True)

from tuneboard_client import cli  # noqa: E402
from tuneboard_client.cli import common  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from tests.conftest import wait_for  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]

STUDY_YAML = """\
name: iris from the cli
dataset: iris            # a name, resolved through the API
hypermodel: dense
tuner: random
objective_metric: val_accuracy
objective_direction: max
max_trials: 2
executions_per_trial: 1
epochs: 2
batch_size: 16
patience: 2
seed: 7
queue: cpu
parallelism: 1
search_space:
  - {name: num_layers, type: fixed, value: 1}
  - {name: units, type: int, min: 8, max: 16, step: 8}
  - {name: learning_rate, type: choice, values: [0.003, 0.01]}
"""


def test_the_cli_from_study_file_to_savedmodel(acme, alice, live_server, start_worker, tmp_path, monkeypatch):
    import tensorflow as tf

    from tests.api.conftest import make_token

    token = make_token(alice, "cli end-to-end")
    monkeypatch.setenv("TUNEBOARD_URL", live_server.url)
    monkeypatch.setenv("TUNEBOARD_TOKEN", token)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("TUNEBOARD_TEAM", raising=False)
    monkeypatch.setattr(common, "TRANSPORT", None)
    runner = CliRunner()
    worker = start_worker()

    def tuneboard(*args, code=0):
        result = runner.invoke(cli.app, [str(a) for a in args])
        assert result.exit_code == code, (f"tuneboard {' '.join(map(str, args))} exited {result.exit_code}:\n"
                                          f"{result.output}\nworker log:\n{worker.log()[-3000:]}")
        assert "Traceback" not in result.output
        return result

    def as_json(*args):
        return json.loads(tuneboard("-o", "json", *args).stdout)

    dataset = as_json("datasets", "add-bundled", "iris", "--name", "iris")
    (tmp_path / "study.yaml").write_text(STUDY_YAML)
    study = as_json("studies", "create", "--file", tmp_path / "study.yaml", "--start")
    assert study["dataset"] == dataset["id"] and study["status"] == "running"

    watched = tuneboard("studies", "watch", study["id"], "--timeout", 400)
    assert "completed" in watched.stdout and "2/2 trials" in watched.stderr
    trials = as_json("trials", "list", study["id"], "--order", "-val_accuracy")
    assert len(trials) == 2 and all(t["status"] == "completed" for t in trials)
    scores = [t["metrics"]["val_accuracy"] for t in trials]
    assert scores == sorted(scores, reverse=True)

    # What the best trial printed: one line an epoch, as text and as JSON.
    printed = tuneboard("logs", "trial", study["id"], trials[0]["id"]).stdout
    assert "epoch 1: " in printed and "val_accuracy" in printed
    (run,) = as_json("logs", "trial", study["id"], trials[0]["id"])
    assert run["running"] is False and run["text"] == printed

    (model,) = as_json("models", "retrain", study["id"], "--top", 1, "--wait", "--name", "iris-dense")
    assert model["status"] == "completed", model["error"]
    # The job completes inside its run; the log's last write follows a moment later.
    wait_for(lambda: not as_json("logs", "model", model["id"])[0]["running"], timeout=30, what="the log to close")
    assert "epoch 1: " in tuneboard("logs", "model", model["id"]).stdout
    assert model["trial"] == trials[0]["id"]
    assert set(model["test_metrics"]) >= {"accuracy", "loss"}

    ensemble = as_json("ensembles", "create", "--members", f"model:{model['id']}", f"trial:{trials[1]['id']}",
                       "--method", "nelder-mead", "--name", "iris-duo", "--wait")
    assert ensemble["status"] == "completed", ensemble["error"]
    assert ensemble["method"] == "nelder_mead"
    weights = [m["weight"] for m in ensemble["members"]]
    assert len(weights) == 2 and sum(weights) == pytest.approx(1.0)

    listed = {m["id"]: m for m in as_json("models", "list")}
    assert {model["id"], ensemble["id"]} <= set(listed)
    board = tuneboard("leaderboard", "iris").stdout
    assert "iris-dense v1" in board and "iris-duo v1" in board

    # The model and the ensemble take the same input: two versions of one registered model.
    assert as_json("register", model["id"], "--as", "iris")["version"] == 1
    assert as_json("register", ensemble["id"], "--as", "iris")["version"] == 2
    tuneboard("alias", "set", "iris", "production", 2)
    shown = as_json("registry", "show", "iris")
    assert shown["input_signature"] == [{"name": "input_0", "shape": [None, 4], "dtype": "float32"}]
    assert shown["output_keys"] == ["output_0"]

    out = tmp_path / "serving"
    tuneboard("models", "download", model["id"], "--format", "savedmodel", "-o", out)
    exported = out / "iris-dense" / "1"
    assert (exported / "saved_model.pb").exists()
    serving = tf.saved_model.load(str(exported)).signatures["serving_default"]
    (input_name,) = serving.structured_input_signature[1]
    spec = serving.structured_input_signature[1][input_name]
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(spec.dtype.as_numpy_dtype)
    (output,) = serving(**{input_name: tf.constant(x)}).values()
    assert output.shape == (5, 3), "three iris species"
    np.testing.assert_allclose(output.numpy().sum(axis=1), 1.0, atol=1e-4)

    # A refused call: the server's message, exit code 1, no traceback.
    refused = tuneboard("models", "download", model["id"], "--format", "onnx", "-o", tmp_path / "x", code=1)
    assert "Unknown format 'onnx'" in refused.stderr
    missing = tuneboard("studies", "show", 999999, code=1)
    assert "Not found" in missing.stderr
