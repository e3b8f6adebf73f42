"""The README's `make run` mode: SQLite, Celery's filesystem transport and a local artifact
folder, with a real worker (and beat) beside it — the same code paths, no services: a study
runs, and its best trial is retrained into a downloadable model."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.worker

SCRIPT = """
import json, sys, time
from experiments.models import Dataset, Study, Team
from experiments.tuning.hypermodel_catalog import DENSE_DEFAULT_SPACE
from experiments.services.studies import study_create
from experiments.services.studies import study_start
team = Team.objects.get(name="Demo team")
dataset = Dataset.objects.get(team=team, bundled_name="iris")
study = study_start(study=study_create(
    team=team, user=None, dataset=dataset, name="embedded", hypermodel="dense",
    search_space=DENSE_DEFAULT_SPACE, tuner="bayesian", objective_metric="val_accuracy",
    objective_direction="max", max_trials=2, epochs=2, batch_size=16))
deadline = time.monotonic() + 180
while study.status == "running" and time.monotonic() < deadline:
    time.sleep(0.5)
    study.refresh_from_db()
from experiments.selectors.trials import study_top_trials
from experiments.services.trained_models import trained_models_request
(model,) = trained_models_request(study=study, user=None, trials=study_top_trials(study=study, n=1),
                                  method="retrain", epoch_source="recorded")
while model.is_active and time.monotonic() < deadline + 120:
    time.sleep(0.5)
    model.refresh_from_db()
print(json.dumps({"status": study.status, "message": study.message,
                  "trials": [t.status for t in study.trials.all()],
                  "checkpoints": [t.checkpoint.storage_name for t in study.trials.all() if t.checkpoint],
                  "model": [model.status, model.error],
                  "model_files": [f.artifact.storage_name for f in model.files.select_related("artifact")]}))
"""


def test_the_embedded_mode_runs_a_study_with_no_external_service(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TUNEBOARD_VAR_DIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2", TUNEBOARD_TF_THREADS="1",
               PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="webapp.settings")

    def manage(*args, **kwargs):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, **kwargs)

    manage("migrate", "--noinput")
    assert "demo / tuneboard-demo" in manage("seed_demo", "--i-know-this-is-not-production").stdout
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-B", "-Q", "cpu", "--concurrency", "1",
         "--schedule", str(tmp_path / "beat-schedule"), "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out = manage("shell", "-c", SCRIPT, timeout=360).stdout
    finally:
        # TERM to the main process, as Ctrl-C in `make run` does: a TERM to the whole group
        # kills the pool's child mid-shutdown and Celery starts a replacement it then waits on.
        os.kill(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:  # never let a slow shutdown hide the real failure
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "completed", (result, (tmp_path / "worker.log").read_text()[-3000:])
    assert result["trials"] == ["completed", "completed"]
    assert (tmp_path / "tuneboard.sqlite3").exists()
    for name in result["checkpoints"]:
        assert (tmp_path / "artifacts" / name).stat().st_size > 0  # a plain local folder
    # Retraining the best trial makes a model in every format, also in the embedded mode.
    assert result["model"] == ["completed", ""], (tmp_path / "worker.log").read_text()[-3000:]
    assert len(result["model_files"]) == 4
    for name in result["model_files"]:
        assert (tmp_path / "artifacts" / name).stat().st_size > 0
