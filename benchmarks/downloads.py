"""Memory and speed of a model download from the web process.

    python -m benchmarks.downloads

Stores a 200 MB model file in PostgreSQL (the artifact storage of a PostgreSQL install),
starts the web process as deployed (gunicorn, one sync worker), downloads the file over
HTTP as a logged-in team member and samples the serving process's RSS meanwhile. Prints one
JSON object as its last line and writes benchmarks/results/downloads.json:
- peak_rss_growth_mb: highest RSS during the download minus RSS just before it (target <= 50);
- throughput_mb_s: file size / request time. The view reads the file twice: once to check its
  sha256 before sending a byte, once to send it.
"""

import hashlib
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import psutil

from benchmarks.harness import RESULTS, ROOT, setup_django

SIZE_MB = 200
SPACE = [{"name": "units", "type": "fixed", "value": 8, "parent": None, "parent_values": []}]
BLOCK = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed_model(path: Path):
    """A completed model whose .keras file is SIZE_MB of random bytes in the artifact storage."""
    from django.contrib.auth import get_user_model

    from experiments.models import Artifact, ModelFile, TrainedModel, Trial
    from experiments.services.artifacts import artifact_create_from_path
    from experiments.services.datasets import dataset_create_bundled
    from experiments.services.studies import study_create
    from experiments.services.teams import team_create

    user = get_user_model().objects.create_user("bench", password="bench-downloads")
    team = team_create(name="downloads", owner=user)
    dataset = dataset_create_bundled(team=team, user=user, bundled_name="iris")
    study = study_create(team=team, user=user, dataset=dataset, name="big", hypermodel="dense", search_space=SPACE,
                         objective_metric="val_loss", objective_direction="min")
    trial = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.COMPLETED, score=0.1)
    with open(path, "wb") as f:
        for _ in range(SIZE_MB):
            f.write(os.urandom(BLOCK))
    artifact = artifact_create_from_path(team=team, kind=Artifact.Kind.MODEL, path=path, filename="big-v1.keras")
    model = TrainedModel.objects.create(team=team, dataset=dataset, study=study, trial=trial, name="big", version=1,
                                        method="promote", seed=1, status="completed")
    ModelFile.objects.create(model=model, format="keras", artifact=artifact)
    return model, artifact


class _Server:
    def __init__(self, env: dict, port: int):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "webapp.wsgi", "--workers", "1", "--bind", f"127.0.0.1:{port}",
             "--timeout", "300"],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(ROOT / "var" / "bench" / "web.log", "wb"),
            start_new_session=True,
        )
        self.port = port
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the web server did not start; see var/bench/web.log") from None
                time.sleep(0.2)

    def worker(self) -> psutil.Process:
        children = psutil.Process(self.process.pid).children()
        assert len(children) == 1, children
        return children[0]

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=30)


def _login(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    csrf = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie")).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urlencode({"username": "bench", "password": "bench-downloads", "csrfmiddlewaretoken": token})
    conn.request("POST", "/login/", body, {"Content-Type": "application/x-www-form-urlencoded",
                                           "Cookie": f"csrftoken={csrf}", "Referer": f"http://127.0.0.1:{port}/"})
    response = conn.getresponse()
    response.read()
    assert response.status == 302, f"login failed: {response.status}"
    session = re.search(r"sessionid=([^;]+)", response.getheader("Set-Cookie")).group(1)
    return f"csrftoken={csrf}; sessionid={session}"


def _sample_rss(process: psutil.Process, samples: list, stop: threading.Event) -> None:
    while not stop.is_set():
        samples.append(process.memory_info().rss)
        time.sleep(0.01)


def main() -> None:
    env = setup_django()
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, artifact = _seed_model(Path(tmp) / "big.keras")
    port = _free_port()
    server = _Server(env, port)
    try:
        cookie = _login(port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        conn.request("GET", f"/models/{model.id}/", headers={"Cookie": cookie})  # warm the worker's code paths
        conn.getresponse().read()
        worker = server.worker()
        baseline = worker.memory_info().rss
        samples, stop = [baseline], threading.Event()
        sampler = threading.Thread(target=_sample_rss, args=(worker, samples, stop), daemon=True)
        sampler.start()
        started = time.monotonic()
        conn.request("GET", f"/models/{model.id}/download/keras/", headers={"Cookie": cookie})
        response = conn.getresponse()
        assert response.status == 200, response.status
        digest, received = hashlib.sha256(), 0
        while block := response.read(BLOCK):
            digest.update(block)
            received += len(block)
        seconds = time.monotonic() - started
        stop.set()
        sampler.join()
    finally:
        server.stop()
    assert received == artifact.size and digest.hexdigest() == artifact.sha256, "the download differs"
    result = {
        "file_mb": round(artifact.size / 1e6, 1),
        "peak_rss_growth_mb": round((max(samples) - baseline) / 1e6, 1),
        "baseline_rss_mb": round(baseline / 1e6, 1),
        "throughput_mb_s": round(artifact.size / 1e6 / seconds, 1),
        "seconds": round(seconds, 2),
        "rss_samples": len(samples),
        "targets": {"peak_rss_growth_mb": 50},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "downloads.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
