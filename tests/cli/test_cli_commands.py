"""The `tuneboard` command against a fake of the API: tables, -o json, exit codes, watch,
retrain --wait, ensembles, downloads, login."""

import json
import os
import stat

from tuneboard_client import cli
from typer.testing import CliRunner

from tests.cli.fake_api import ORIGIN, TOKEN, savedmodel_zip

runner = CliRunner()


def run(*args):
    return runner.invoke(cli.app, [str(a) for a in args])


STUDY_YAML = """\
name: iris dense
dataset: iris
hypermodel: dense
objective_metric: val_accuracy
max_trials: 2
epochs: 2
search_space:
  - {name: units, type: int, min: 8, max: 16, step: 8}
"""


def test_studies_create_from_a_yaml_file(fake, tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY_YAML)
    result = run("studies", "create", "--file", path, "--start")
    assert result.exit_code == 0, result.output
    assert "created and started (status running)" in result.stdout
    payload = fake.created_payloads[-1]
    assert payload["dataset"] == 1 and payload["start"] is True and payload["hypermodel"] == "dense"

    result = run("-o", "json", "studies", "create", "-f", path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "created"
    assert fake.created_payloads[-1]["start"] is False


def test_an_invalid_study_file_is_refused_before_any_call(fake, tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY_YAML.replace("max_trials: 2", "max_trails: 2"))
    result = run("studies", "create", "--file", path)
    assert result.exit_code == 1
    assert "max_trails: unknown field (did you mean 'max_trials'?)" in result.stderr
    assert "Traceback" not in result.output and not fake.requests


def test_server_errors_print_the_message_and_exit_1(fake, tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(STUDY_YAML.replace("hypermodel: dense", "hypermodel: transformer"))
    result = run("studies", "create", "--file", path)
    assert result.exit_code == 1
    assert result.stderr.strip() == ("Error: hypermodel: Unknown hypermodel 'transformer': "
                                     "choose one of dense, tiny, cnn.")
    assert "Traceback" not in result.output

    result = run("studies", "show", 404)
    assert (result.exit_code, result.stderr.strip()) == (1, "Error: Not found.")

    path.write_text(STUDY_YAML.replace("dataset: iris", "dataset: wine"))
    result = run("studies", "create", "--file", path)
    assert result.exit_code == 1 and "No dataset named 'wine'" in result.stderr


def test_a_bad_token_or_no_configuration(fake, monkeypatch):
    monkeypatch.setenv("TUNEBOARD_TOKEN", "revoked")
    result = run("studies", "list")
    assert (result.exit_code, result.stderr.strip()) == (1, "Error: Invalid token.")
    monkeypatch.delenv("TUNEBOARD_TOKEN")
    result = run("studies", "list")
    assert result.exit_code == 1 and "No API token: set TUNEBOARD_TOKEN or run `tuneboard login`" in result.stderr


def test_studies_list_table_and_json(fake):
    for index in range(3):
        fake.add_study(f"study {index}", status="completed")
    table = run("studies", "list")
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "NAME", "STATUS"]
    assert len(lines) == 2 + 3 and "study 0" in lines[-1]

    for args in (("-o", "json", "studies", "list"), ("studies", "list", "-o", "json")):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert [s["name"] for s in json.loads(result.stdout)] == ["study 2", "study 1", "study 0"]

    result = run("studies", "list", "-o", "yaml")
    assert result.exit_code == 1 and "--output must be one of table, json" in result.stderr


def test_watch_ends_with_completed(fake):
    study = fake.add_study("watched", status="running", max_trials=4)
    fake.study_script[study["id"]] = [("running", 0, 0, 1), ("running", 2, 0, 1), ("completed", 3, 1, 0)]
    result = run("studies", "watch", study["id"])
    assert result.exit_code == 0, result.output
    assert "\r[" in result.stderr and "4/4 trials  (3 ok, 1 failed, 0 running)" in result.stderr
    assert f"Study {study['id']} completed: best 0.9500 (trial 1)" in result.stdout
    assert fake.paths().count(f"/api/v1/studies/{study['id']}/") == 3


def test_watch_exits_1_when_the_study_failed(fake):
    study = fake.add_study("doomed", status="running")
    fake.study_script[study["id"]] = [("running", 0, 1, 1), ("failed", 0, 3, 0)]
    result = run("studies", "watch", study["id"])
    assert result.exit_code == 1
    assert "failed — 3 trials in a row failed." in result.stdout

    fake.study_script[study["id"]] = [("failed", 0, 3, 0)]
    result = run("-o", "json", "studies", "watch", study["id"])
    assert result.exit_code == 1 and json.loads(result.stdout)["status"] == "failed"


def test_watch_a_study_that_was_never_started(fake):
    study = fake.add_study("saved")
    result = run("studies", "watch", study["id"])
    assert result.exit_code == 1 and "has not been started" in result.stderr


def test_trials_list_ordered_and_followed(fake):
    study = fake.add_study("s", status="completed")
    for number, accuracy in ((1, 0.7), (2, 0.9), (3, 0.8)):
        fake.add_trial(study["id"], number, accuracy)
    result = run("-o", "json", "trials", "list", study["id"], "--order", "-val_accuracy")
    assert result.exit_code == 0, result.output
    assert [t["number"] for t in json.loads(result.stdout)] == [2, 3, 1]
    assert "ordering=-val_accuracy" in str(fake.requests[-1].url)

    result = run("trials", "list", study["id"], "--follow")
    assert result.exit_code == 0, result.output
    assert [line.split()[1] for line in result.stdout.splitlines()] == ["number=1", "number=2", "number=3"]


def test_models_retrain_top_and_wait(fake):
    study = fake.add_study("done", status="completed")
    result = run("models", "retrain", study["id"], "--top", 3, "--wait", "--name", "best")
    assert result.exit_code == 0, result.output
    rows = result.stdout.splitlines()[2:]
    assert len(rows) == 3 and all("completed" in row and "best v1" in row for row in rows)
    assert fake.created_payloads == [] and json.loads(fake.requests[0].content) == {
        "top_n": 3, "method": "retrain", "name": "best"}

    listed = run("-o", "json", "models", "list")
    assert [m["status"] for m in json.loads(listed.stdout)] == ["completed"] * 3


def test_models_retrain_wait_exits_1_when_one_fails(fake):
    study = fake.add_study("done", status="completed")
    original = fake.request_models

    def failing(*args):
        response = original(*args)
        first = json.loads(response.content)["models"][0]["id"]
        fake.model_script[first] = ["running", "failed"]
        return response

    fake.request_models = failing
    result = run("models", "retrain", study["id"], "--top", 2, "--wait")
    assert result.exit_code == 1
    assert "failed: The worker ran out of memory." in result.stderr


def test_ensembles_create_maps_nelder_mead_and_waits(fake):
    result = run("ensembles", "create", "--members", "model:1", "model:2", "trial:9", "--method", "nelder-mead",
                 "--name", "trio", "--wait")
    assert result.exit_code == 0, result.output
    assert fake.created_payloads[-1] == {"members": ["model:1", "model:2", "trial:9"], "method": "nelder_mead",
                                         "name": "trio"}
    assert "completed" in result.stdout and "trial:9" in result.stdout
    ensemble_id = max(fake.models)
    assert f"/api/v1/ensembles/{ensemble_id}/" in fake.paths(), "polls the URL the 202 named"

    result = run("ensembles", "create", "-m", "model:1,model:2", "--method", "greedy", "--greedy-rounds", 5,
                 "--seed", 3, "-o", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["status"] == "queued"
    assert fake.created_payloads[-1] == {"members": ["model:1", "model:2"], "method": "greedy", "greedy_rounds": 5,
                                         "seed": 3}

    for args, message in ((["--members", "model:1"], "at least two members"),
                          (["--members", "model:1", "checkpoint:2"], "not 'checkpoint:2'"),
                          (["--members", "model:1", "model:2", "--method", "vote"], "not 'vote'")):
        result = run("ensembles", "create", *args)
        assert result.exit_code == 1 and message in result.stderr, result.output


def test_download_savedmodel_is_extracted(fake, tmp_path):
    model = fake.add_model("iris-dense")
    fake.files[(model["id"], "savedmodel")] = savedmodel_zip("iris-dense", 1)
    out = tmp_path / "export"
    result = run("models", "download", model["id"], "--format", "savedmodel", "-o", out)
    assert result.exit_code == 0, result.output
    assert (out / "iris-dense" / "1" / "saved_model.pb").read_bytes() == b"\x08\x01fake-graph"
    assert sorted(p.name for p in out.iterdir()) == ["iris-dense"], "no zip or temp folder left behind"
    assert "SavedModel extracted to" in result.stdout

    fake.files[(model["id"], "keras")] = b"keras"
    result = run("models", "download", model["id"], "-o", tmp_path / "m.keras")
    assert result.exit_code == 0 and (tmp_path / "m.keras").read_bytes() == b"keras"


def test_download_with_a_wrong_checksum_is_refused(fake, tmp_path):
    model = fake.add_model("iris-dense")
    fake.files[(model["id"], "savedmodel")] = savedmodel_zip()
    fake.corrupt_downloads = True
    out = tmp_path / "export"
    result = run("models", "download", model["id"], "--format", "savedmodel", "-o", out)
    assert result.exit_code == 1
    assert "Checksum mismatch" in result.stderr and "Traceback" not in result.output
    assert list(out.iterdir()) == []


def test_leaderboard_by_dataset_name(fake):
    result = run("leaderboard", "iris")
    assert result.exit_code == 0, result.output
    assert "Ranked by test accuracy" in result.stdout and "best v1" in result.stdout
    assert "third v1" in result.stdout and "Reached the epoch cap." in result.stdout, "every page is shown"
    assert fake.paths().count("/api/v1/leaderboard/1/") == 2
    result = run("leaderboard", "1", "--csv")
    assert result.stdout.startswith("rank,id,label\n1,5,best v1")
    result = run("leaderboard", "twin")
    assert result.exit_code == 1 and "give the id instead" in result.stderr


def test_login_stores_a_private_config(fake, monkeypatch, tmp_path):
    monkeypatch.delenv("TUNEBOARD_URL")
    monkeypatch.delenv("TUNEBOARD_TOKEN")
    result = runner.invoke(cli.app, ["login", "--url", ORIGIN], input=f"{TOKEN}\n")
    assert result.exit_code == 0, result.output
    path = tmp_path / "config" / "tuneboard" / "config.json"
    assert json.loads(path.read_text()) == {"url": ORIGIN, "token": TOKEN}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert TOKEN not in result.stdout, "the token is not echoed"
    assert run("studies", "list").exit_code == 0, "later commands use the stored login"

    result = runner.invoke(cli.app, ["login", "--url", ORIGIN, "--token", "wrong"])
    assert result.exit_code == 1 and "Invalid token." in result.stderr
    assert json.loads(path.read_text())["token"] == TOKEN, "a refused token is not stored"


def test_team_option_sends_the_header(fake):
    assert run("--team", 7, "studies", "list").exit_code == 0
    assert fake.requests[-1].headers["X-Tuneboard-Team"] == "7"
