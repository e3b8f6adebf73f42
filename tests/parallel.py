"""What each pytest-xdist process of `make test`'s parallel phase gets of its own, set in the
environment before the settings load, so the worker processes its tests start inherit it too.

pytest-django already gives each process its own test database (test_<name>_gw0, ...); here each
also gets its own Redis database, its own var folder (artifacts, serving layout, process logs)
and one thread for TensorFlow and BLAS, so N processes do not each claim every core (the Celery
workers the tests start already run on one: TUNEBOARD_TF_THREADS=1 in tests/conftest.py)."""

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

# "gw0", "gw1", ... inside an xdist process; "" in a plain pytest run (and the alone phase).
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

THREAD_LIMITS = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}


def worker_number(worker: str = WORKER) -> int | None:
    return int(worker.removeprefix("gw")) if worker else None


def redis_url_for(url: str, number: int) -> str:
    """The Redis database `number` below the one the suite was given (15 by default: gw0 15,
    gw1 14, ...): counting down keeps clear of database 0, which local apps tend to use."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    if base - number < 0:
        raise RuntimeError(f"xdist process gw{number} needs Redis database {base} - {number}, below 0: "
                           "start the suite from a higher TUNEBOARD_TEST_REDIS_DB or with fewer processes.")
    return urlunsplit(parts._replace(path=f"/{base - number}"))


# Set once isolated: the Celery workers and fresh processes a test starts inherit the environment,
# PYTEST_XDIST_WORKER included, and load these settings again; a second shift would put their
# broker on another process's Redis database.
ISOLATED = "TUNEBOARD_TEST_ISOLATED_FOR"


def isolate(environ=os.environ, worker: str = WORKER) -> None:
    number = worker_number(worker)
    if number is None or environ.get(ISOLATED) == worker:
        return
    environ[ISOLATED] = worker
    for name, value in THREAD_LIMITS.items():
        environ.setdefault(name, value)
    broker = environ.get("CELERY_BROKER_URL", "")
    if broker.startswith(("redis://", "rediss://")):
        environ["CELERY_BROKER_URL"] = redis_url_for(broker, number)
    var = Path(environ.get("TUNEBOARD_VAR_DIR") or Path(__file__).resolve().parent.parent / "var")
    environ["TUNEBOARD_VAR_DIR"] = str(var / worker)
    for name in ("TUNEBOARD_ARTIFACT_DIR", "TUNEBOARD_SERVING_DIR"):
        if environ.get(name):
            environ[name] = str(Path(environ[name]) / worker)


# make test's three phases, each a pytest run of its own: "parallel" (every test without the
# two markers, TEST_PROCESSES at a time), "serial" (@serial: bounds in seconds or a memory
# ceiling, two at a time, away from the crowd) and "alone" (@alone: a test that stops the shared
# PostgreSQL or loads every core, with nothing beside it). "all" is a plain run of everything.
PHASES = ("all", "parallel", "serial", "alone")


def phase_of(config) -> str:
    """--phase, or under xdist "parallel", so an @serial or @alone test never runs in the crowd."""
    return config.getoption("phase") or ("parallel" if hasattr(config, "workerinput") else "all")


def item_phase(item) -> str:
    """@alone wins over @serial: one test of a serial module may need the host to itself."""
    return next((name for name in ("alone", "serial") if item.get_closest_marker(name) is not None), "parallel")


# Tests that take tens of seconds: a real worker or a real browser.
LONG_MARKERS = ("worker", "browser")


def long_first(items: list) -> None:
    """The long tests first, the rest in collection order: the serial phase hands out one test at a
    time (--dist load --maxschedchunk 1), so its two processes each start a long one and the short
    ones fill in at the end. (The parallel phase keeps pytest-django's order and worksteal's
    contiguous shares: handing 3,000 tests out one by one, long ones first, measured ~1 min slower
    on 2 cores.)"""
    items.sort(key=lambda item: not any(item.get_closest_marker(name) for name in LONG_MARKERS))


# What a test module must say for the serial or alone phase to import it at all.
PHASE_MARKS = {"serial": "mark.serial", "alone": "mark.alone"}


def outside_phase(phase: str, path: Path) -> bool:
    """A test module the serial or alone phase need not import: it names no test of that phase.
    Importing all 200 modules (TensorFlow among them) costs each pytest process of those phases
    ~9 s of CPU for the handful of tests they run."""
    mark = PHASE_MARKS.get(phase)
    return (mark is not None and path.suffix == ".py" and path.name.startswith("test_")
            and mark not in path.read_text(encoding="utf-8"))


def select_phase(config, items: list) -> None:
    phase = phase_of(config)
    if phase == "all":
        return
    keep, drop = [], []
    for item in items:
        (keep if item_phase(item) == phase else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    if phase == "serial":
        long_first(items)
