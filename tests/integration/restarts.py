"""Restart the real PostgreSQL and Redis the suite runs against (fault-tolerance tests), or a
Redis server of the test's own, which it can restart beside other tests."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis
from celery import current_app
from django.conf import settings
from django.db import connection


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


def restart_postgres() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SHOW config_file")
        config_file = cursor.fetchone()[0]
        cursor.execute("SHOW server_version_num")
        major = int(cursor.fetchone()[0]) // 10000
    connection.close()
    config_dir = Path(config_file).parent
    if shutil.which("pg_ctlcluster") and str(config_dir).startswith("/etc/postgresql/"):
        version, cluster = config_dir.parts[-2], config_dir.parts[-1]
        command = ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart", "-m", "fast"]
    else:
        command = _as_postgres([f"/usr/lib/postgresql/{major}/bin/pg_ctl", "-D", str(config_dir), "restart",
                                "-m", "fast", "-w"])
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            connection.ensure_connection()
            return
        except Exception:
            connection.close()
            time.sleep(0.5)
    raise AssertionError("PostgreSQL did not come back after the restart.")


def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


class OwnRedis:
    """A real redis-server on a free port for one test: stopping or restarting it loses what it
    held, as with the suite's, without touching the Redis that other tests share."""

    def __init__(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.env = {"CELERY_BROKER_URL": self.url}  # for start_worker and start_beat
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.process = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if client.ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server did not answer on port {self.port}.")

    def stop(self) -> None:
        """Stop without saving (nothing is kept on disk here): every message is lost."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def restart(self) -> None:
        self.stop()
        self.start()


def use_broker(url: str) -> None:
    """This process's sends (study starts, model requests) go to `url` from now on: the Celery
    app lets go of its connection and producer pools, so the next send takes the pool for `url`.
    (Not force_close_all: kombu keeps one pool per URL, and a closed one would refuse every later
    send to the shared Redis.)"""
    app = current_app
    app._pool = None
    app.amqp._producer_pool = None
    # Not broker_url: its CELERY_BROKER_URL in the environment wins over the configuration.
    app.conf.broker_write_url = app.conf.broker_read_url = url
