"""`make run`'s embedded mode as a new user meets it, in a real Chromium: the script itself
(scripts/run_embedded.sh: SQLite, the filesystem transport, the worker with beat) on a fresh
folder. A parallelism-2 study really runs two trials at once, and an ensemble request is
claimed within 3 s of the click by the idle worker; with one slot, the page says so and its
ETA holds within 30 % of the time that was actually left."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import psutil
import pytest

from tests.conftest import ROOT, TEST_HYPERMODELS

# serial: a pick-up timed in seconds (make test runs these two at a time; the ETA test alone).
pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.serial]

# What a new user's shell has: none of the suite's PostgreSQL, Redis or fast recovery settings.
SUITE_ONLY = ("DATABASE_URL", "CELERY_BROKER_URL", "TUNEBOARD_ARTIFACT_STORAGE", "TUNEBOARD_VAR_DIR",
              "TUNEBOARD_TRIAL_", "TUNEBOARD_WORKER_", "TUNEBOARD_REAPER_", "TUNEBOARD_RESEND_")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Embedded:
    def __init__(self, folder: Path, **env):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.var = folder / "var"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(SUITE_ONLY)}
        self.log = open(folder / "run.log", "wb")
        self.process = subprocess.Popen(
            ["bash", "scripts/run_embedded.sh"], cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**clean, "PORT": str(self.port), "TUNEBOARD_VAR_DIR": str(self.var),
                 "TUNEBOARD_HYPERMODELS": TEST_HYPERMODELS, "PYTHONPATH": str(ROOT),
                 "SECRET_KEY": "embedded-test-" + "k" * 40, **env},
            start_new_session=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (folder / "run.log").read_text(errors="replace")[-3000:]
            try:
                if httpx.get(f"{self.url}/login/", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise AssertionError("make run's server did not answer within 240 s")

    def rows(self, sql: str, *args) -> list[tuple]:
        with sqlite3.connect(self.var / "tuneboard.sqlite3", timeout=30) as db:
            return db.execute(sql, args).fetchall()

    def stop(self) -> None:
        # As Ctrl-C in make run's terminal: SIGINT to the whole group. (SIGTERM to the group also
        # reaches Celery's pool children directly; the pool starts a replacement child during the
        # warm shutdown and the worker then hangs until killed.) The workers stop on it; the script
        # and its dev server do not here, as a terminal's would: started from a process that
        # ignores SIGINT (make's, xdist's), they inherit the ignore, and waited 60 s each time for
        # the kill. They hold nothing to lose, so once the workers are gone they are killed.
        os.killpg(self.process.pid, signal.SIGINT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self._celery_running():
            time.sleep(0.2)
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.log.close()

    def _celery_running(self) -> bool:
        for process in psutil.process_iter(["cmdline"]):
            try:
                if os.getpgid(process.pid) == self.process.pid and "celery" in " ".join(process.info["cmdline"] or []):
                    return True
            except (ProcessLookupError, psutil.Error):
                continue
        return False


@pytest.fixture
def embedded(tmp_path):
    started = []

    def start(**env) -> Embedded:
        started.append(Embedded(tmp_path, **env))
        return started[-1]

    yield start
    for app in started:
        app.stop()


def _log_in(page, app: Embedded) -> None:
    page.goto(f"{app.url}/login/")
    page.get_by_label("Username").fill("demo")
    page.get_by_label("Password").fill("tuneboard-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{app.url}/")


def _start_study(page, app: Embedded, *, name: str, hypermodel: str, trials: int, epochs: int,
                 backend: str = "tensorflow") -> int:
    (dataset,) = app.rows("SELECT id FROM experiments_dataset WHERE bundled_name = 'digits'")[0]
    page.goto(f"{app.url}/studies/new/?dataset={dataset}")
    page.get_by_label("Study name").fill(name)
    page.select_option("#id_hypermodel", hypermodel)
    page.select_option("#id_backend", backend)
    page.locator("#hp-reset").click()
    page.get_by_label("Max trials").fill(str(trials))
    page.get_by_label("Epochs", exact=True).fill(str(epochs))
    page.get_by_label("Parallelism").fill("2")
    page.locator("#save-and-start").click()
    page.wait_for_url("**/studies/*/")
    return int(re.search(r"/studies/(\d+)/", page.url).group(1))


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_make_run_runs_a_parallelism_2_study_two_at_a_time_and_picks_up_an_ensemble_at_once(
        embedded, page, screenshot):
    # Samples every second, so the Workers page has figures while these short trials run.
    app = embedded(TUNEBOARD_SYSTEM_SAMPLE_SECONDS="1", TUNEBOARD_JOB_LOG_FLUSH_SECONDS="1")
    workers = "SELECT backend, queues, concurrency FROM experiments_worker ORDER BY backend"
    deadline = time.monotonic() + 120
    while len(app.rows(workers)) < 2:
        assert time.monotonic() < deadline, f"the embedded workers never registered: {app.rows(workers)}"
        time.sleep(0.5)
    (jax, tensorflow) = app.rows(workers)
    assert tensorflow[0] == "tensorflow" and tensorflow[2] >= 2  # slots from the machine
    assert jax[0] == "jax" and "cpu-jax" in jax[1] and jax[2] == 1  # JAX is installed: its worker beside
    _log_in(page, app)
    study = _start_study(page, app, name="two at once", hypermodel="slow", trials=4, epochs=6)
    running = "SELECT count(*) FROM experiments_trial WHERE study_id = ? AND status = 'running'"
    deadline = time.monotonic() + 180
    while app.rows(running, study)[0][0] < 2:
        assert time.monotonic() < deadline, "the embedded worker never ran two trials at once"
        time.sleep(0.1)
    page.locator("#running-trials", has_text="2 running").wait_for(timeout=10_000)
    assert page.locator("#capacity").count() == 0
    screenshot("two-running")
    # What the two trials use now, on SQLite as make run stores it: the Workers page says it.
    page.goto(f"{app.url}/workers/")
    page.locator(".worker-live", has_text="CPU").first.wait_for(timeout=15_000)
    page.goto(f"{app.url}/studies/{study}/")
    page.locator("#study-status", has_text="Completed").wait_for(timeout=240_000)

    # Two models from the best trials, then an ensemble of them while the worker is idle.
    form = page.locator("#model-request-form")
    form.get_by_label("How many of the best trials").fill("2")
    form.get_by_label("Epoch cap for best-epoch detection").fill("3")
    form.get_by_label("Model name").fill("pair")
    form.locator("#request-models").click()
    page.wait_for_url("**/models/")
    # Two configurations, two names: the name given, suffixed with each trial's id.
    done = "SELECT count(*) FROM experiments_trainedmodel WHERE name LIKE 'pair-trial-%' AND status = 'completed'"
    deadline = time.monotonic() + 300
    while app.rows(done)[0][0] < 2:
        assert time.monotonic() < deadline, "the two models were never made"
        time.sleep(0.5)
    time.sleep(2)  # the worker is idle again, waiting on the transport
    page.goto(f"{app.url}/models/")
    page.locator("#new-ensemble").click()
    for name, version in app.rows("SELECT name, version FROM experiments_trainedmodel WHERE name LIKE 'pair-trial-%'"):
        page.get_by_label(f"{name} v{version}").check()
    page.get_by_label("Name").fill("pair-blend")
    clicked = datetime.now(UTC)
    page.locator("#build-ensemble").click()
    claimed = "SELECT started FROM experiments_trainedmodel WHERE name = 'pair-blend' AND started IS NOT NULL"
    deadline = time.monotonic() + 60
    while not app.rows(claimed):
        assert time.monotonic() < deadline, "the ensemble was never claimed"
        time.sleep(0.05)
    waited = (_utc(app.rows(claimed)[0][0]) - clicked).total_seconds()
    assert waited <= 3, f"the ensemble was claimed {waited:.1f} s after the click"

    # A new user picks JAX on the form: the embedded JAX worker runs it.
    study = _start_study(page, app, name="on jax", hypermodel="dense", trials=1, epochs=2, backend="jax")
    assert page.locator("#study-backend").inner_text().startswith("JAX")
    page.locator("#study-status", has_text="Completed").wait_for(timeout=180_000)
    trials = app.rows("SELECT status, worker_name FROM experiments_trial WHERE study_id = ?", study)
    assert [(status, name.split("@")[0]) for status, name in trials] == [("completed", "embedded-jax")]


@pytest.mark.alone  # the ETA follows the host's load: a neighbour ending mid-study moves it by a third
def test_one_slot_is_said_and_the_eta_holds_within_30_percent(embedded, page):
    app = embedded(TUNEBOARD_EMBEDDED_SLOTS="1")
    _log_in(page, app)
    study = _start_study(page, app, name="one slot", hypermodel="slow", trials=10, epochs=4)
    notice = page.locator("#capacity")
    notice.wait_for(timeout=30_000)
    assert "Parallelism 2, but 1 slot on queue cpu" in notice.inner_text()
    finished = ("SELECT count(*) FROM experiments_trial WHERE study_id = ? "
                "AND status IN ('completed', 'pruned', 'failed')")
    deadline = time.monotonic() + 180
    while app.rows(finished, study)[0][0] < 3:  # durations observed, a trial under way
        assert time.monotonic() < deadline, "the study never finished three trials"
        time.sleep(0.2)
    page.reload()
    eta = page.locator("#eta").inner_text()
    said_at = datetime.now(UTC)
    left = re.search(r"about (\d+) (s|min)", eta)
    assert left, eta
    promised = int(left.group(1)) * (60 if left.group(2) == "min" else 1)
    ended = "SELECT finished FROM experiments_study WHERE id = ? AND status = 'completed'"
    deadline = time.monotonic() + 240
    while not app.rows(ended, study):
        assert time.monotonic() < deadline, "the study never completed"
        time.sleep(0.2)
    actual = (_utc(app.rows(ended, study)[0][0]) - said_at).total_seconds()
    assert abs(promised - actual) <= 0.3 * actual, f"the page said {eta!r}; it took {actual:.0f} s"
    assert app.rows("SELECT max(concurrency) FROM experiments_worker")[0][0] == 1
