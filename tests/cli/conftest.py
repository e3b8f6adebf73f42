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
