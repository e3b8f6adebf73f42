"""`tuneboard predict` against a fake of the API: uploads the file for a model id or a registry
alias, prints the progress while it waits, writes the CSV (and NPZ), and exits 1 with the
server's message when the request is refused or the job fails."""

import pytest

from tests.cli.test_cli_commands import run


@pytest.fixture
def inputs(tmp_path):
    path = tmp_path / "new.csv"
    path.write_text("a,b\n1,2\n3,4\n5,6\n")
    return path


def test_predict_uploads_waits_with_progress_and_writes_the_csv_and_npz(fake, inputs, tmp_path):
    result = run("predict", 7, "--input", inputs, "-o", tmp_path / "out.csv", "--npz", tmp_path / "out.npz")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.csv").read_text() == "row,label,setosa,versicolor\n1,setosa,0.9,0.1\n"
    assert (tmp_path / "out.npz").read_bytes() == b"PK fake npz"
    assert "running: 2 / 3 rows" in result.stderr and "completed: 3 / 3 rows" in result.stderr
    upload = fake.prediction_uploads[-1]
    assert b'name="model"\r\n\r\n7' in upload and b"1,2\n3,4\n5,6\n" in upload


def test_predict_with_a_registry_alias_names_the_version_it_resolved_to(fake, inputs, tmp_path):
    result = run("predict", "--ref", "iris@production", "--input", inputs, "-o", tmp_path / "out.csv")
    assert result.exit_code == 0, result.output
    assert "(iris@production, version 2)" in result.stderr
    assert b'name="reference"\r\n\r\niris@production' in fake.prediction_uploads[-1]


def test_predict_refusals_and_failures_exit_1_with_the_message(fake, inputs, tmp_path):
    out = tmp_path / "out.csv"
    refused = run("predict", "--ref", "iris@nowhere", "--input", inputs, "-o", out)
    assert refused.exit_code == 1 and "has no alias 'nowhere'" in refused.stderr
    both = run("predict", 7, "--ref", "iris@production", "--input", inputs, "-o", out)
    assert both.exit_code == 1 and "one of them" in both.stderr
    fake.prediction_script = [("running", 1), ("failed", 1)]
    failed = run("predict", 7, "--input", inputs, "-o", out)
    assert failed.exit_code == 1 and "failed: The worker ran out of memory." in failed.stderr
    assert not out.exists()
