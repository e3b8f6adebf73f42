"""The Python client against a fake of the API: pagination, errors, downloads, the study file."""

import hashlib
import os
import stat

import httpx
import pytest
from tuneboard_client import config, study_file
from tuneboard_client.api import Client, TuneboardAPIError, normalise_method

from tests.cli.fake_api import ORIGIN, TOKEN, FakeTuneboard, savedmodel_zip


@pytest.fixture
def fake():
    return FakeTuneboard()


@pytest.fixture
def client(fake):
    with Client(ORIGIN, TOKEN, team=4, transport=fake.transport()) as client:
        yield client


def test_lists_follow_every_page(fake, client):
    for index in range(5):
        fake.add_study(f"study {index}")
    studies = client.list_studies()
    assert [s["name"] for s in studies] == [f"study {i}" for i in reversed(range(5))]
    assert fake.paths().count("/api/v1/studies/") == 3, "five rows at two a page: three pages"
    assert client.list_studies(limit=3) and len(client.list_studies(limit=3)) == 3
    assert all(r.headers["X-Tuneboard-Team"] == "4" for r in fake.requests)


def test_base_url_forms(fake):
    for base in (ORIGIN, ORIGIN + "/", ORIGIN + "/api/v1", ORIGIN + "/api/v1/"):
        assert Client(base, TOKEN, transport=fake.transport()).url("studies/") == ORIGIN + "/api/v1/studies/"
    assert "X-Tuneboard-Team" not in Client(ORIGIN, TOKEN, transport=fake.transport())._http.headers


def test_errors_carry_the_servers_message(fake, client):
    with pytest.raises(TuneboardAPIError) as caught:
        client.create_study({"name": "x", "dataset": 1, "hypermodel": "nope", "search_space": []})
    assert caught.value.status == 400 and caught.value.field == "hypermodel"
    assert str(caught.value) == "hypermodel: Unknown hypermodel 'nope': choose one of dense, tiny, cnn."

    fake.handle = lambda request: httpx.Response(400, json={
        "detail": "Objective metric: Pick a metric.", "field": "objective_metric",
        "errors": {"objective_metric": ["Pick a metric."], "epochs": ["Ensure this value is at least 1."]}})
    with pytest.raises(TuneboardAPIError) as caught:
        Client(ORIGIN, TOKEN, transport=fake.transport()).create_study({})
    assert str(caught.value) == "Objective metric: Pick a metric.\nepochs: Ensure this value is at least 1."
    del fake.handle

    with pytest.raises(TuneboardAPIError, match="Not found") as caught:
        client.get_study(999)
    assert caught.value.status == 404

    with pytest.raises(TuneboardAPIError, match="Invalid token") as caught:
        Client(ORIGIN, "wrong", transport=fake.transport()).list_studies()
    assert caught.value.status == 401

    with pytest.raises(TuneboardAPIError, match="500 Internal Server Error"):
        client.get("boom/")

    with pytest.raises(TuneboardAPIError, match="No server URL"):
        Client("", TOKEN)
    with pytest.raises(TuneboardAPIError, match="No API token"):
        Client(ORIGIN, "")


def test_unreachable_server_is_an_api_error():
    with pytest.raises(TuneboardAPIError, match="Cannot reach http://127.0.0.1:9"):
        Client("http://127.0.0.1:9", TOKEN, timeout=2).list_studies()


def test_dataset_by_id_or_name(client):
    assert client.resolve_dataset(3) == 3
    assert client.resolve_dataset("3") == 3
    assert client.resolve_dataset("iris") == 1
    with pytest.raises(TuneboardAPIError, match="No dataset named 'wine'"):
        client.resolve_dataset("wine")
    with pytest.raises(TuneboardAPIError, match=r"2 datasets are named 'twin' \(ids 2, 3\)"):
        client.resolve_dataset("twin")


def test_download_checks_the_sha256(fake, client, tmp_path):
    model = fake.add_model("m")
    content = b"keras-bytes" * 1000
    fake.files[(model["id"], "keras")] = content
    path = client.download_model(model["id"], "keras", tmp_path)
    assert path == tmp_path / f"model-{model['id']}.keras"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(content).hexdigest()

    fake.corrupt_downloads = True
    target = tmp_path / "corrupt.keras"
    with pytest.raises(TuneboardAPIError, match="Checksum mismatch.*nothing was saved"):
        client.download_model(model["id"], "keras", target)
    assert not target.exists() and not list(tmp_path.glob("*.part")), "a refused download leaves nothing behind"

    with pytest.raises(TuneboardAPIError, match="no tflite export"):
        client.download_model(model["id"], "tflite", tmp_path)
    with pytest.raises(TuneboardAPIError, match="Unknown format 'onnx'"):
        client.download_model(model["id"], "onnx", tmp_path)


def test_retrain_and_wait(fake, client):
    study = fake.add_study("done", status="completed")
    models = client.request_models(study["id"], top_n=2, name="best")
    assert [m["status"] for m in models] == ["queued", "queued"]
    finished = [client.wait_model(m, interval=0, sleep=lambda s: None) for m in models]
    assert [m["status"] for m in finished] == ["completed", "completed"]
    with pytest.raises(TuneboardAPIError, match="either top_n or trial"):
        client.request_models(study["id"])


def test_ensemble_method_is_normalised(fake, client):
    client.create_ensemble(["model:1", "trial:2"], method="nelder-mead", name="duo")
    assert fake.created_payloads[-1] == {"members": ["model:1", "trial:2"], "method": "nelder_mead", "name": "duo"}
    assert normalise_method("Nelder Mead") == "nelder_mead"


def test_new_trials_use_after(fake, client):
    study = fake.add_study("s", status="running")
    first = fake.add_trial(study["id"], 1, 0.8)
    second = fake.add_trial(study["id"], 2, 0.9)
    assert client.new_trials(study["id"], after=first["id"]) == [second]
    assert "after=" in str(fake.requests[-1].url)


# --- the study file ---------------------------------------------------------------------------

VALID = """
name: iris dense
dataset: iris
hypermodel: dense
tuner: random
objective_metric: val_accuracy
objective_direction: max
max_trials: 2
epochs: 2
search_space:
  - {name: units, type: int, min: 8, max: 32, step: 8}
  - {name: learning_rate, type: float, min: 0.001, max: 0.01, sampling: log}
  - {name: activation, type: choice, values: [relu, tanh]}
"""


def test_a_study_file_may_set_a_pruner():
    fields = study_file.parse(VALID + "pruner: median\npruning_warmup_epochs: 0\npruning_percentile: 30\n")
    assert (fields["pruner"], fields["pruning_warmup_epochs"], fields["pruning_percentile"]) == ("median", 0, 30)


def test_a_study_file_may_set_stopping_rules_and_they_reach_the_payload(client):
    fields = study_file.parse(VALID + "stop_target: 0.95\nstop_patience: 3\nstop_min_delta: 0.001\n")
    payload, _ = study_file.resolve(fields, client.resolve_dataset)
    assert (payload["stop_target"], payload["stop_patience"], payload["stop_min_delta"]) == (0.95, 3, 0.001)


def test_a_valid_study_file_resolves_its_dataset(client):
    fields = study_file.parse(VALID)
    payload, start = study_file.resolve(fields, client.resolve_dataset)
    assert start is None
    assert payload["dataset"] == 1 and payload["max_trials"] == 2
    assert payload["search_space"][0] == {"name": "units", "type": "int", "min": 8, "max": 32, "step": 8,
                                          "parent": None, "parent_values": []}


@pytest.mark.parametrize(("text", "problems"), [
    ("", ["is empty"]),
    ("- a\n- b\n", ["must be a mapping of fields"]),
    ("name: [unclosed\n", ["is not valid YAML at line 2"]),
    ("name: x\nhypermodel: dense\n", ["dataset: required", "search_space: required"]),
    (VALID + "max_trails: 3\n", ["max_trails: unknown field (did you mean 'max_trials'?)"]),
    (VALID + "epochs_per_trial: 3\n", ["epochs_per_trial: unknown field"]),
    (VALID.replace("max_trials: 2", "max_trials: two"), ["max_trials: must be a whole number, not text 'two'"]),
    (VALID.replace("max_trials: 2", "max_trials: 0"), ["max_trials: must be 1 or more, not 0"]),
    (VALID.replace("epochs: 2", "epochs: true"), ["epochs: must be a whole number, not boolean True"]),
    (VALID.replace("tuner: random", "tuner: genetic"),
     ["tuner: must be one of random, bayesian, hyperband, hyperband_tpe, grid"]),
    (VALID.replace("name: iris dense", "name: 12"), ["name: must be text, not number 12"]),
    (VALID.replace("dataset: iris", "dataset: [1]"), ["dataset: must be a dataset id or name"]),
    (VALID + "start: maybe\n", ["start: must be true or false"]),
    (VALID + "pruner: sometimes\n", ["pruner: must be one of none, median, percentile, successive_halving"]),
    (VALID + "pruning_min_trials: 0\n", ["pruning_min_trials: must be 1 or more, not 0"]),
    (VALID + "pruning_percentile: half\n", ["pruning_percentile: must be a number, not text 'half'"]),
    (VALID + "stop_target: high\n", ["stop_target: must be a number, not text 'high'"]),
    (VALID + "stop_target: .nan\n", ["stop_target: must be a finite number"]),
    (VALID + "stop_patience: 0\n", ["stop_patience: must be 1 or more, not 0"]),
    (VALID + "stop_patience: 2\nstop_min_delta: -0.1\n", ["stop_min_delta: must be 0 or more, not -0.1"]),
    (VALID + "stop_min_delta: 0.01\n", ["stop_min_delta: only applies with stop_patience"]),
    (VALID + "stop_after: 3\n", ["stop_after: unknown field (did you mean"]),
    (VALID + "  - {name: units, type: int}\n",
     ["search_space[4] (units): the name 'units' is used twice", "search_space[4] (units): min is required",
      "search_space[4] (units): max is required"]),
    (VALID + "  - {name: depth, type: integer}\n", ["search_space[4] (depth): type must be one of int, float"]),
    (VALID + "  - {type: fixed}\n", ["search_space[4]: needs a name", "value is required for type fixed"]),
    (VALID + "  - {name: opt, type: choice, values: []}\n", ["values must be a non-empty list"]),
    (VALID.replace("search_space:\n", "search_space: units\nx_:\n"), ["search_space: must be a list"]),
])
def test_study_file_problems_are_all_reported(text, problems):
    with pytest.raises(study_file.StudyFileError) as caught:
        study_file.parse(text, source="study.yaml")
    message = str(caught.value)
    assert message.startswith("study.yaml")
    for problem in problems:
        assert problem in message, message


def test_study_file_that_cannot_be_read(tmp_path):
    with pytest.raises(study_file.StudyFileError, match="cannot be read"):
        study_file.load(tmp_path / "missing.yaml")


# --- configuration ----------------------------------------------------------------------------


def test_config_file_is_private_and_env_wins(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    for name in ("TUNEBOARD_URL", "TUNEBOARD_TOKEN", "TUNEBOARD_TEAM"):
        monkeypatch.delenv(name, raising=False)
    path = config.save(config.Settings(url="http://a", token="t1", team="3"))
    assert path == tmp_path / "tuneboard" / "config.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert config.load() == config.Settings(url="http://a", token="t1", team="3")
    monkeypatch.setenv("TUNEBOARD_URL", "http://b")
    monkeypatch.setenv("TUNEBOARD_TOKEN", "t2")
    assert config.load() == config.Settings(url="http://b", token="t2", team="3")
    assert config.load(token="t3").token == "t3"
    path.chmod(0o644)
    config.save(config.Settings(url="http://a", token="t4"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, "a rewrite narrows a widened mode"
    path.write_text("not json")
    with pytest.raises(config.ConfigError, match="Run `tuneboard login` again"):
        config.load()


def test_savedmodel_zip_helper_is_a_zip():
    assert savedmodel_zip()[:2] == b"PK"


def test_trial_epochs_are_paginated(fake, client):
    study = fake.add_study("s")
    assert [row["epoch"] for row in client.trial_epochs(study["id"], 5)] == [1, 2, 3]


def test_an_alias_stays_one_path_segment_whatever_is_typed():
    paths = []

    def handle(request: httpx.Request) -> httpx.Response:
        paths.append((request.method, request.url.raw_path.decode()))
        return httpx.Response(200, json={})

    with Client(ORIGIN, TOKEN, transport=httpx.MockTransport(handle)) as client:
        client.remove_alias(5, "../../studies/3")
        client.set_alias(5, "..", 1)
        client.set_alias(5, "production", 2)
    assert paths == [("DELETE", "/api/v1/registry/5/aliases/%2E%2E%2F%2E%2E%2Fstudies%2F3/"),
                     ("PUT", "/api/v1/registry/5/aliases/%2E%2E/"),
                     ("PUT", "/api/v1/registry/5/aliases/production/")]
