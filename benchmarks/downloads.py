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
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks.harness import RESULTS, ROOT, setup_django
from benchmarks.web_process import RssSampler, WebServer, login

SIZE_MB = 200
SPACE = [{"name": "units", "type": "fixed", "value": 8, "parent": None, "parent_values": []}]
BLOCK = 1024 * 1024


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


def main() -> None:
    env = setup_django()
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, artifact = _seed_model(Path(tmp) / "big.keras")
    server = WebServer(env, ROOT / "var" / "bench" / "web.log")
    try:
        cookie = login(server, "bench", "bench-downloads")
        conn = server.connection()
        conn.request("GET", f"/models/{model.id}/", headers={"Cookie": cookie})  # warm the worker's code paths
        conn.getresponse().read()
        with RssSampler(server.worker()) as rss:
            started = time.monotonic()
            conn.request("GET", f"/models/{model.id}/download/keras/", headers={"Cookie": cookie})
            response = conn.getresponse()
            assert response.status == 200, response.status
            digest, received = hashlib.sha256(), 0
            while block := response.read(BLOCK):
                digest.update(block)
                received += len(block)
            seconds = time.monotonic() - started
    finally:
        server.stop()
    assert received == artifact.size and digest.hexdigest() == artifact.sha256, "the download differs"
    result = {
        "file_mb": round(artifact.size / 1e6, 1),
        "peak_rss_growth_mb": round((rss.peak - rss.baseline) / 1e6, 1),
        "baseline_rss_mb": round(rss.baseline / 1e6, 1),
        "throughput_mb_s": round(artifact.size / 1e6 / seconds, 1),
        "seconds": round(seconds, 2),
        "rss_samples": len(rss.samples),
        "targets": {"peak_rss_growth_mb": 50},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "downloads.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
