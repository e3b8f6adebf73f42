"""Shared fixtures: personas (alice and bob on one team, charlie on another), the real
PostgreSQL test database, and real Celery worker processes against the test Redis."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from experiments.models import Membership, Team
from experiments.services.teams import membership_add

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"
TEST_HYPERMODELS = ",".join([
    "failing=tests.fixtures.hypermodels:build_failing",
    "nan_loss=tests.fixtures.hypermodels:build_nan_loss",
    "tiny=tests.fixtures.hypermodels:build_tiny",
])


def _user(django_user_model, username):
    return django_user_model.objects.create_user(username=username, password=PASSWORD)


@pytest.fixture
def acme(db):
    return Team.objects.create(name="Acme")


@pytest.fixture
def globex(db):
    return Team.objects.create(name="Globex")


@pytest.fixture
def alice(acme, django_user_model):
    user = _user(django_user_model, "alice")
    membership_add(team=acme, user=user, role=Membership.Role.OWNER)
    return user


@pytest.fixture
def bob(acme, django_user_model):
    """On alice's team, as a viewer."""
    user = _user(django_user_model, "bob")
    membership_add(team=acme, user=user, role=Membership.Role.VIEWER)
    return user


@pytest.fixture
def charlie(globex, django_user_model):
    user = _user(django_user_model, "charlie")
    membership_add(team=globex, user=user, role=Membership.Role.OWNER)
    return user


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def wait_for(predicate, *, timeout: float = 120, interval: float = 0.25, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"Timed out after {timeout}s waiting for {what}.")


class WorkerProcess:
    """A real `celery worker` process serving the test database and broker."""

    def __init__(self, name: str, env: dict, queues: str = "cpu", concurrency: int = 1, log_dir: Path | None = None):
        self.name = name
        log_dir = log_dir or ROOT / "var" / "test" / "workers"
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-Q", queues, "--concurrency",
             str(concurrency), "--pool", "prefork", "--hostname", f"{name}@%h", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


def _database_url() -> str:
    db = settings.DATABASES["default"]
    user = db.get("USER") or "postgres"
    return f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


@pytest.fixture(scope="session")
def worker_env(django_db_setup, django_db_blocker):
    """Environment for worker processes: the *test* database and the test broker."""
    assert settings.USING_POSTGRES, "The suite runs against PostgreSQL: run it with `make test`."
    import redis

    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # no stale wake-ups from earlier runs
    return {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "TUNEBOARD_TF_THREADS": "1",
        "TUNEBOARD_TRIAL_HEARTBEAT_SECONDS": "1",
        "TUNEBOARD_HYPERMODELS": TEST_HYPERMODELS,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
def start_worker(worker_env):
    """Factory: start real worker processes; all are killed at the end of the test."""
    started: list[WorkerProcess] = []

    def start(name: str = "w1", **kwargs) -> WorkerProcess:
        worker = WorkerProcess(name, worker_env, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill(signal.SIGTERM)
