"""`make run` needs no configuration: scripts/embedded_secret_key.sh makes a random signing key
once, readable by its owner only, and gives the same one back on every later run."""

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def key(var_dir: Path) -> str:
    env = {**os.environ, "TUNEBOARD_VAR_DIR": str(var_dir), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/embedded_secret_key.sh"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_the_key_is_made_once_private_and_long(tmp_path):
    first = key(tmp_path / "var")
    path = tmp_path / "var" / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == first
    # What Django's check --deploy asks of a key (security.W009).
    assert len(first) >= 50 and len(set(first)) >= 5 and not first.startswith("django-insecure-")
    assert key(tmp_path / "var") == first
    assert not list((tmp_path / "var").glob("*.new"))


def test_each_installation_gets_its_own_key(tmp_path):
    assert key(tmp_path / "a") != key(tmp_path / "b")


def test_an_empty_key_file_is_replaced(tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret_key").write_text("")
    assert len(key(tmp_path / "var")) >= 50
