"""Runs a script in a fresh Python process on one Keras backend, as a worker child of that backend would run it
(Keras picks its backend once per process), and returns the JSON it printed last on a line `RESULT {...}`."""

import json
import os
import subprocess
import sys


def run_on_backend(backend: str, script: str, *args: str, timeout: int = 300) -> dict:
    env = {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULT "))
