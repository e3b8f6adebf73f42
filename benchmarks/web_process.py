"""The web process as deployed (gunicorn, one sync worker) in a subprocess, a logged-in
session against it, and its memory sampled while a request runs. Shared by the benchmarks
and the tests that measure the web process from outside."""

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import psutil

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class WebServer:
    """gunicorn with one sync worker, so one process serves every request."""

    def __init__(self, env: dict, log_path: Path, *, timeout: int = 300):
        self.port = free_port()
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "webapp.wsgi", "--workers", "1", "--bind", f"127.0.0.1:{self.port}",
             "--timeout", str(timeout)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "wb"),
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"the web server did not start; see {self.log_path}") from None
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def connection(self, timeout: float = 300) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def worker(self) -> psutil.Process:
        children = psutil.Process(self.process.pid).children()
        assert len(children) == 1, children
        return children[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)


def login(server: WebServer, username: str, password: str) -> str:
    """The Cookie header of a logged-in session (with its CSRF token)."""
    conn = server.connection()
    conn.request("GET", "/login/")
    response = conn.getresponse()
    page = response.read().decode()
    csrf = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie")).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    conn.request("POST", "/login/", body, {"Content-Type": "application/x-www-form-urlencoded",
                                           "Cookie": f"csrftoken={csrf}", "Referer": server.url})
    response = conn.getresponse()
    response.read()
    assert response.status == 302, f"login failed: {response.status}"
    cookies = response.getheader("Set-Cookie")
    session = re.search(r"sessionid=([^;]+)", cookies).group(1)
    rotated = re.search(r"csrftoken=([^;]+)", cookies)  # Django rotates the CSRF token on login
    return f"csrftoken={rotated.group(1) if rotated else csrf}; sessionid={session}"


def csrf_token(cookie: str) -> str:
    return re.search(r"csrftoken=([^;]+)", cookie).group(1)


def tree_rss(process: psutil.Process) -> int:
    """RSS of a process plus all its descendants, in bytes (work handed to a child counts)."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        try:
            total += member.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class RssSampler:
    """Samples tree_rss(process) every 10 ms in a thread between start() and stop()."""

    def __init__(self, process: psutil.Process):
        self.process = process
        self.baseline = tree_rss(process)
        self.samples = [self.baseline]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(tree_rss(self.process))
            time.sleep(0.01)

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak(self) -> int:
        return max(self.samples)
