"""Shared set-up for benchmarks: a database of their own next to the tests', the test
Redis on another db number, and real worker processes."""

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
HYPERMODELS = "sleep=benchmarks.sleep_hypermodel:SleepHyperModel"


# Another name keeps two checkouts' benchmarks from dropping each other's database.
BENCH_DATABASE = os.environ.get("TUNEBOARD_BENCH_DATABASE", "tuneboard_bench")


def bench_database_url(name: str | None = None) -> str:
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/tuneboard")
    parts = urlparse(base)
    if parts.scheme not in ("postgres", "postgresql"):
        sys.exit("Benchmarks run against PostgreSQL: set DATABASE_URL=postgres://... (make bench does).")
    return urlunparse(parts._replace(path=f"/{name or BENCH_DATABASE}"))


def setup_django(database: str | None = None) -> dict:
    """Recreate the benchmark database, migrate it, and configure Django in this process."""
    import psycopg

    database = database or BENCH_DATABASE
    url = bench_database_url(database)
    admin = urlunparse(urlparse(url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{database}"')
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/14"),
        "TUNEBOARD_HYPERMODELS": HYPERMODELS,
        "TUNEBOARD_TF_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": str(ROOT),
        "TUNEBOARD_VAR_DIR": str(ROOT / "var" / "bench"),
        # Settings refuse to load without one while DEBUG is off; a fresh one per run is enough.
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    import redis

    redis.Redis.from_url(env["CELERY_BROKER_URL"]).flushdb()
    return env


class Worker:
    def __init__(self, env: dict, name: str, concurrency: int):
        log_dir = ROOT / "var" / "bench"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", "cpu", "--concurrency",
             str(concurrency), "--hostname", f"{name}@%h", "--without-gossip", "--without-mingle",
             "--loglevel", "WARNING"],
            cwd=ROOT, env=env, stdout=open(log_dir / f"{name}.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


class Beat(Worker):
    """`celery beat`: the reaper on its schedule, as deployments run it."""

    def __init__(self, env: dict, name: str):
        log_dir = ROOT / "var" / "bench"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "beat", "--schedule", str(log_dir / f"{name}-schedule"),
             "--loglevel", "WARNING"],
            cwd=ROOT, env=env, stdout=open(log_dir / f"{name}.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def wait_finished(study, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        study.refresh_from_db()
        if study.status != "running":
            return
        time.sleep(0.2)
    raise TimeoutError(f"study {study.id} did not finish in {timeout}s")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]
