"""Restart the real PostgreSQL and Redis the suite runs against (fault-tolerance tests)."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import redis
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


def _redis_client() -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=int(os.environ.get("TUNEBOARD_TEST_REDIS_PORT", "6379")))


def stop_redis() -> None:
    """Stop Redis without saving (what it keeps on disk is nothing here): every message is lost."""
    try:
        _redis_client().shutdown(nosave=True)
    except redis.exceptions.ConnectionError:
        pass  # shutdown closes the connection under us


def start_redis() -> None:
    client = _redis_client()
    port = client.connection_pool.connection_kwargs["port"]
    subprocess.run(["redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "--port", str(port),
                    "--save", "", "--appendonly", "no"], check=True, capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if client.ping():
                return
        except redis.exceptions.ConnectionError:
            time.sleep(0.2)
    raise AssertionError("Redis did not come back after the restart.")


def restart_redis() -> None:
    stop_redis()
    start_redis()


def broker() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)
