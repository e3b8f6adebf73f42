"""Shared fixtures: personas (alice and bob on one team, charlie on another), the real
PostgreSQL test database, and real Celery worker processes against the test Redis."""

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from experiments.models import Membership, Team
from experiments.services.memberships import membership_add
from tests import forked_workers
from tests.parallel import PHASES, WORKER, outside_phase, phase_of, select_phase

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery"
TEST_HYPERMODELS = ",".join([
    "failing=tests.fixtures.hypermodels:build_failing",
    "chatty=tests.fixtures.hypermodels:build_chatty_failing",
    "nan_loss=tests.fixtures.hypermodels:build_nan_loss",
    "tiny=tests.fixtures.hypermodels:build_tiny",
    "slow=tests.fixtures.hypermodels:SlowTiny",
])


def pytest_addoption(parser):
    parser.addoption("--phase", choices=PHASES, default=None,
                     help="make test's phases: parallel (all but @serial and @alone, the default under -n), "
                          "serial (only @serial, two at a time), alone (only @alone, one at a time), "
                          "all (the default without -n)")


def pytest_ignore_collect(collection_path, config):
    return True if outside_phase(phase_of(config), collection_path) else None


def pytest_collection_modifyitems(config, items):
    select_phase(config, items)


def _user(django_user_model, username):
    return django_user_model.objects.create_user(username=username, password=PASSWORD)


# Webhook receivers in the tests listen on 127.0.0.1: allowed the way a deployment allows an
# internal receiver (TUNEBOARD_WEBHOOK_ALLOWED_NETWORKS), only where a test asks for it.
LOOPBACK_RECEIVERS = "127.0.0.1/32"
# This machine has no DNS: names under example.com (and Slack's webhook host) answer with a public
# address, as they would on a deployment's network.
EXAMPLE_COM = "93.184.215.14"
PUBLIC_NAMES = ("example.com", "hooks.slack.com")


@pytest.fixture
def loopback_receivers(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network(LOOPBACK_RECEIVERS)]


@pytest.fixture(autouse=True)
def example_com_resolves(monkeypatch):
    from experiments.security import egress

    real = egress.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if isinstance(host, str) and any(host == name or host.endswith("." + name) for name in PUBLIC_NAMES):
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (EXAMPLE_COM, port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(egress, "getaddrinfo", resolve)


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
def dave(acme, django_user_model):
    """On alice's team as an editor (who makes things, then leaves or is demoted)."""
    user = _user(django_user_model, "dave")
    membership_add(team=acme, user=user, role=Membership.Role.EDITOR)
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


LOG_DIR = ROOT / "var" / "test" / "processes" / WORKER  # two xdist processes both start a "w1"


class CeleryProcess:
    """A real `celery worker` (or `celery beat`) process on the test database and broker."""

    def __init__(self, name: str, env: dict, args: list[str]):
        self.name = name
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"{name}.log"
        if args[0] == "worker" and forked_workers.can_fork(env, ROOT):
            self.process = forked_workers.ForkedProcess(["-A", "webapp", *args], env, self.log_path, ROOT)
        else:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "webapp", *args],
                cwd=ROOT, env=env, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def send(self, sig, *, group: bool) -> None:
        """`sig` to the main process only (what Kubernetes and Docker do) or to its whole group."""
        if group:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:  # a forked worker signalled before it took a session of its own
                os.kill(self.process.pid, sig)
        else:
            self.process.send_signal(sig)

    def exited_within(self, seconds: float) -> bool:
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.process.poll() is None:
            self.send(sig, group=True)
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
        "TUNEBOARD_TRIAL_STALE_SECONDS": "5",
        "TUNEBOARD_WORKER_HEARTBEAT_SECONDS": "1",
        "TUNEBOARD_RESEND_AFTER_SECONDS": "4",
        "TUNEBOARD_REAPER_INTERVAL_SECONDS": "1",
        "TUNEBOARD_JOB_LOG_FLUSH_SECONDS": "1",
        "TUNEBOARD_SYSTEM_SAMPLE_SECONDS": "1",
        "TUNEBOARD_HYPERMODELS": TEST_HYPERMODELS,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
def start_worker(worker_env):
    """Factory: start real worker processes; all are stopped at the end of the test."""
    started: list[CeleryProcess] = []

    def start(name: str = "w1", queues: str = "cpu", concurrency: int = 1, env: dict | None = None) -> CeleryProcess:
        worker = CeleryProcess(name, {**worker_env, **(env or {})}, [
            "worker", "-Q", queues, "--concurrency", str(concurrency), "--pool", "prefork",
            "--hostname", f"{name}@%h", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
        ])
        started.append(worker)
        return worker

    yield start
    # The test is over: SIGKILL (a warm shutdown costs ~2 s a worker, minutes over the suite). A
    # message a killed worker held stays unacknowledged in Redis for the visibility timeout (an
    # hour), so no later test sees it; the graceful shutdowns are tested where they matter.
    for worker in started:
        worker.kill()


@pytest.fixture
def start_beat(worker_env, tmp_path):
    """Factory: a real `celery beat` sending the reaper every second."""
    started: list[CeleryProcess] = []

    def start(name: str = "beat", env: dict | None = None) -> CeleryProcess:
        beat = CeleryProcess(name, {**worker_env, **(env or {})},
                             ["beat", "--schedule", str(tmp_path / f"{name}-schedule"), "--loglevel", "INFO"])
        started.append(beat)
        return beat

    yield start
    for beat in started:
        beat.kill()
