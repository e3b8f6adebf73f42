"""Memory and time of dataset uploads in the web process.

    python -m benchmarks.uploads

Starts the web process as deployed (gunicorn, one sync worker) on the benchmark database,
logs in and uploads through the dataset page, sampling the RSS of the serving process (and
of any children it starts) every 10 ms:
- an .npz of 0.4 MB whose x is 100,000 × 1,000 float32 zeros: 400 MB once unpacked, the
  case of issue 16 (the web process went from 185 to 1,775 MB);
- a CSV of about 45 MB (600,000 rows of 8 numbers and a class), under the 50 MB upload limit.
Prints one JSON object as its last line and writes benchmarks/results/uploads.json: per file
its size, peak_rss_mb, peak_rss_growth_mb (over the RSS just before the upload), seconds and
the outcome; the target is peak_rss_mb <= 300.
"""

import json
import re
import tempfile
import time
import uuid
from html import unescape
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS, ROOT, setup_django
from benchmarks.web_process import RssSampler, WebServer, csrf_token, login

NPZ_ROWS, NPZ_COLUMNS = 100_000, 1_000
CSV_ROWS, CSV_COLUMNS = 600_000, 8
PEAK_TARGET_MB = 300
MB = 1_000_000


def zeros_npz(path: Path, rows: int = NPZ_ROWS, columns: int = NPZ_COLUMNS, classes: int = 10) -> Path:
    """What numpy.savez_compressed writes for x = rows × columns float32 zeros and y = row % classes
    (0.4 MB for 400 MB of zeros), written a block at a time: this process never holds x either."""
    from experiments.datasets.arrays import write_npz

    x = np.broadcast_to(np.zeros(columns, dtype=np.float32), (rows, columns))  # no memory behind it
    with open(path, "wb") as out:
        write_npz(out, {"x": (x, None), "y": (np.arange(rows) % classes, None)}, compresslevel=6)
    return path


def numbers_csv(path: Path, rows: int = CSV_ROWS, columns: int = CSV_COLUMNS) -> Path:
    """Random numbers with three decimals and a label column of three classes."""
    rng = np.random.default_rng(0)
    with open(path, "w") as out:
        out.write(",".join(f"f{i}" for i in range(columns)) + ",label\n")
        for start in range(0, rows, 10_000):
            block = np.round(rng.normal(size=(min(10_000, rows - start), columns)), 3)
            labels = rng.integers(0, 3, len(block))
            for row, label in zip(block.tolist(), labels, strict=True):
                out.write(",".join(map(str, row)) + f",class{label}\n")
    return path


def upload(server: WebServer, cookie: str, path: Path, fields: dict) -> dict:
    """POST the file to the upload page as a browser would; the outcome is the new dataset's
    address (a redirect) or the message on the page."""
    boundary = uuid.uuid4().hex
    parts = [(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n').encode()
             for name, value in {"csrfmiddlewaretoken": csrf_token(cookie), **fields}.items()]
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    with tempfile.TemporaryFile() as body:
        body.write(b"".join(parts) + head)
        with open(path, "rb") as source:
            while block := source.read(1024 * 1024):
                body.write(block)
        body.write(tail)
        length = body.tell()
        body.seek(0)
        conn = server.connection(timeout=600)
        conn.request("POST", "/datasets/upload/", body=body, headers={
            "Cookie": cookie, "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(length), "Referer": server.url})
        response = conn.getresponse()
        page = response.read().decode(errors="replace")
    if response.status == 302:
        return {"status": 302, "location": response.getheader("Location")}
    errors = re.findall(r'<ul class="errorlist[^"]*">(.*?)</ul>', page, re.S)
    return {"status": response.status, "errors": [unescape(re.sub(r"<[^>]+>", "", e)).strip() for e in errors]}


def measured_upload(server: WebServer, cookie: str, path: Path, fields: dict) -> dict:
    """upload() with the serving process's memory sampled meanwhile."""
    conn = server.connection()
    conn.request("GET", "/datasets/upload/", headers={"Cookie": cookie})  # warm the worker's code paths
    conn.getresponse().read()
    with RssSampler(server.worker()) as rss:
        started = time.monotonic()
        outcome = upload(server, cookie, path, fields)
        seconds = time.monotonic() - started
    return {
        "file_mb": round(path.stat().st_size / MB, 2),
        "baseline_rss_mb": round(rss.baseline / MB, 1),
        "peak_rss_mb": round(rss.peak / MB, 1),
        "peak_rss_growth_mb": round((rss.peak - rss.baseline) / MB, 1),
        "seconds": round(seconds, 2),
        "rss_samples": len(rss.samples),
        "outcome": outcome,
    }


def _seed_user() -> tuple[str, str]:
    from django.contrib.auth import get_user_model

    from experiments.services.teams import team_create

    user = get_user_model().objects.create_user("bench", password="bench-uploads")
    team_create(name="uploads", owner=user)
    return "bench", "bench-uploads"


def main() -> None:
    env = setup_django()
    username, password = _seed_user()
    common = {"task": "auto", "val_fraction": "0.15", "test_fraction": "0.15", "seed": "0", "kind": "auto"}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        npz = zeros_npz(Path(tmp) / "zeros.npz")
        csv = numbers_csv(Path(tmp) / "numbers.csv")
        server = WebServer(env, ROOT / "var" / "bench" / "web.log", timeout=600)
        try:
            cookie = login(server, username, password)
            results["npz_400mb_unpacked"] = {
                "unpacked_mb": round(NPZ_ROWS * NPZ_COLUMNS * 4 / MB),
                **measured_upload(server, cookie, npz, {**common, "name": "zeros"}),
            }
            results["csv"] = {
                "rows": CSV_ROWS,
                **measured_upload(server, cookie, csv, {**common, "name": "numbers", "target_column": "label"}),
            }
        finally:
            server.stop()
    result = {**results, "targets": {"peak_rss_mb": PEAK_TARGET_MB}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "uploads.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
