"""A real gunicorn started as Kubernetes starts it with TUNEBOARD_HTTPS=true: browsers' plain
HTTP is redirected to https:// and HTTPS (as the proxy's X-Forwarded-Proto says) gets HSTS and
secure cookies, while the probes, /metrics and KEDA's /scaling/ keep answering plain HTTP."""

import http.client
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import LOG_DIR, ROOT

# A real server process on the test database (the mark makes pytest-django create it).
pytestmark = [pytest.mark.django_db, pytest.mark.worker]

HOST = "tuneboard.example.com"
SCALING_TOKEN = "scaling-token-for-the-redirect-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def https_web(worker_env):
    port = free_port()
    env = {**worker_env, "TUNEBOARD_HTTPS": "true", "ALLOWED_HOSTS": f"{HOST},localhost,tuneboard-web",
           "CSRF_TRUSTED_ORIGINS": f"https://{HOST}", "TUNEBOARD_SCALING_TOKEN": SCALING_TOKEN,
           "TUNEBOARD_METRICS_TOKEN": ""}
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = LOG_DIR / "https-web.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "webapp.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        cwd=ROOT, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            if get(port, "/healthz", host="localhost").status == 200:
                break
        except OSError:
            pass
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.25)
    yield port
    os.killpg(process.pid, 15)
    process.wait(timeout=30)


class Answer:
    def __init__(self, response):
        self.status = response.status
        self.headers = response.headers
        self.body = response.read()


def get(port, path, *, host, **headers) -> Answer:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": host, **headers})
        return Answer(conn.getresponse())
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/login/", "/", "/api/v1/studies/", "/admin/"])
def test_plain_http_pages_are_redirected_to_https(https_web, path):
    answer = get(https_web, path, host=HOST)
    assert answer.status == 301
    assert answer.headers["Location"] == f"https://{HOST}{path}"


def test_https_through_the_proxy_gets_the_page_with_hsts_and_secure_cookies(https_web):
    answer = get(https_web, "/login/", host=HOST, **{"X-Forwarded-Proto": "https"})
    assert answer.status == 200
    assert answer.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    cookies = answer.headers.get_all("Set-Cookie")
    csrf = [c for c in cookies if c.startswith("csrftoken=")]
    assert csrf and all("; Secure" in c for c in cookies), cookies


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/healthz", {}, 200),
        ("/readyz", {}, 200),
        ("/metrics", {}, 200),  # from loopback, no token configured
        ("/scaling/cpu/", {"Authorization": f"Bearer {SCALING_TOKEN}"}, 200),
        ("/scaling/cpu/", {}, 403),  # answered by the view, not redirected
    ],
)
def test_probes_metrics_and_scaling_answer_plain_http(https_web, path, headers, status):
    # Kubernetes' probes send Host: localhost (web.yaml); KEDA calls the Service by name.
    host = "tuneboard-web:8000" if path.startswith("/scaling/") else "localhost"
    answer = get(https_web, path, host=host, **headers)
    assert answer.status == status, answer.body[:500]
    assert "Strict-Transport-Security" not in answer.headers  # only ever sent over HTTPS
