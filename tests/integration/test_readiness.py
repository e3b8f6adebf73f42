"""/readyz follows the real PostgreSQL: 503 while it is stopped, 200 again once it is back."""

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.integration.restarts import _as_postgres

# alone: it stops the shared PostgreSQL (make test runs it with no other test beside it).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.alone]


def postgres_ctl_command(action: str) -> list[str]:
    """The same pg_ctlcluster / pg_ctl choice as restarts.restart_postgres, for stop or start."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW config_file")
        config_file = cursor.fetchone()[0]
        cursor.execute("SHOW server_version_num")
        major = int(cursor.fetchone()[0]) // 10000
    config_dir = Path(config_file).parent
    if shutil.which("pg_ctlcluster") and str(config_dir).startswith("/etc/postgresql/"):
        version, cluster = config_dir.parts[-2], config_dir.parts[-1]
        return ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, action, *(
            ["-m", "fast"] if action == "stop" else [])]
    return _as_postgres([f"/usr/lib/postgresql/{major}/bin/pg_ctl", "-D", str(config_dir), action, "-w",
                         *(["-m", "fast"] if action == "stop" else [])])


def test_readyz_is_503_while_postgres_is_stopped_and_200_after_it_starts(client):
    assert client.get("/readyz").status_code == 200
    stop, start = postgres_ctl_command("stop"), postgres_ctl_command("start")
    connection.close()
    subprocess.run(stop, check=True, capture_output=True, timeout=120)
    try:
        response = client.get("/readyz")
        assert response.status_code == 503
        body = response.json()
        assert body["database"] == "failed" and body["broker"] == "ok"
        assert body["errors"]["database"]
        assert client.get("/healthz").status_code == 200  # the process itself is fine
    finally:
        subprocess.run(start, check=True, capture_output=True, timeout=120)
    deadline = time.monotonic() + 60
    while True:
        response = client.get("/readyz")
        if response.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert response.status_code == 200, response.content
    assert response.json() == {"database": "ok", "broker": "ok"}
