"""The code stays linted, and the domain never depends on the worker runtime."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = re.compile(r"^\s*(from|import)\s+(tensorflow|keras|keras_tuner|workers)\b", re.MULTILINE)


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_domain_and_the_web_never_import_tensorflow_keras_or_the_worker_runtime():
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("experiments", "webapp")
        for path in (ROOT / folder).rglob("*.py")
        if HEAVY.search(path.read_text())
    ]
    assert offenders == []
