"""Run a script in a fresh interpreter (nothing this test process imported leaks in) and
read the JSON result it prints behind MARKER."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = "RESULT:"
DEPLOYMENT_PREFIXES = ("TUNEBOARD_", "DATABASE_URL", "CELERY_", "DEBUG", "SECRET_KEY")


# Settings refuse to load without a key while DEBUG is off; a test about the key passes None.
SECRET_KEY = "fresh-process-signing-key-" + "Gm4Rw8Zt2Xk6Pn0Vb3Jd7Hq1" * 2


def run_in_fresh_process(script: str, variables: dict[str, str | None], *, timeout: float) -> dict:
    """`variables` on top of the environment less its deployment variables; None unsets one."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(DEPLOYMENT_PREFIXES)}
    env.update({"DJANGO_SETTINGS_MODULE": "webapp.settings", "PYTHONPATH": str(ROOT), "SECRET_KEY": SECRET_KEY})
    env.update(variables)
    env = {key: value for key, value in env.items() if value is not None}
    completed = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    line = next((ln for ln in completed.stdout.splitlines() if ln.startswith(MARKER)), None)
    assert line, f"exit {completed.returncode}; stderr:\n{completed.stderr[-5000:]}"
    return json.loads(line[len(MARKER) :])
