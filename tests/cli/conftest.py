"""The fake API every command test talks to (tests/cli/fake_api.py), in place of the network."""

import pytest
from tuneboard_client.cli import common

from tests.cli.fake_api import ORIGIN, TOKEN, FakeTuneboard


@pytest.fixture
def fake(monkeypatch, tmp_path):
    server = FakeTuneboard()
    monkeypatch.setattr(common, "TRANSPORT", server.transport())
    monkeypatch.setattr(common, "POLL_SLEEP", lambda seconds: None)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("TUNEBOARD_URL", ORIGIN)
    monkeypatch.setenv("TUNEBOARD_TOKEN", TOKEN)
    monkeypatch.delenv("TUNEBOARD_TEAM", raising=False)
    return server


@pytest.fixture
def live_tuneboard(alice, live_server, tmp_path, monkeypatch):
    """`tuneboard(*args, code=0)`: the command line against the live server as alice, its output (the exit code
    checked, never a traceback)."""
    from tuneboard_client import cli
    from typer.testing import CliRunner

    from tests.api.conftest import make_token

    monkeypatch.setenv("TUNEBOARD_URL", live_server.url)
    monkeypatch.setenv("TUNEBOARD_TOKEN", make_token(alice, "cli"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("TUNEBOARD_TEAM", raising=False)
    monkeypatch.setattr(common, "TRANSPORT", None)
    runner = CliRunner()

    def tuneboard(*args, code=0):
        result = runner.invoke(cli.app, [str(a) for a in args])
        assert result.exit_code == code, f"tuneboard {' '.join(map(str, args))}: {result.output}"
        assert "Traceback" not in result.output
        return result.output

    return tuneboard
