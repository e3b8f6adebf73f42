"""Celery workers for the tests, forked from a process that has already imported TensorFlow, Keras,
KerasTuner and the other heavy libraries (multiprocessing's forkserver with a preload list).

Started as `python -m celery`, each TensorFlow worker's pool child spent about 5 s of CPU importing
them before its first job, a hundred-odd times a run on a 2-core machine where the integration
tests wait on exactly that. Forked, the worker and its pool children share what was imported, as
the pool children of a deployed worker share what their parent imported. Only libraries are
preloaded: the project's modules, its settings and its connections are made in the worker, from
the environment the test gives it, as in a plain start. A worker whose environment changes what
those imports would do (another Keras backend, another PYTHONPATH) starts as a plain process."""

import multiprocessing
import os
import subprocess
import sys

PRELOAD = ["numpy", "scipy", "sklearn", "tensorflow", "keras", "keras_tuner", "optuna", "django", "celery",
           "kombu", "redis", "psycopg"]
# Environment that decides what the preloaded imports do (the forkserver keeps what this process had
# when it started): a worker that sets any of these otherwise is started plainly.
IMPORT_ENVIRONMENT = ("KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                      "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")

_context = None
_started_with: dict = {}


def _import_environment() -> dict:
    return _started_with or {name: os.environ.get(name) for name in IMPORT_ENVIRONMENT}


def can_fork(env: dict, root) -> bool:
    started_with = _import_environment()
    return (all(env.get(name) == started_with[name] for name in IMPORT_ENVIRONMENT)
            and env.get("KERAS_BACKEND", "tensorflow") == "tensorflow"
            and env.get("PYTHONPATH") in (None, str(root)))


def _forkserver():
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
        _started_with.update(_import_environment())  # the first Process.start launches it with this
    return _context


def _run_celery(args: list[str], env: dict, log_path: str, cwd: str) -> None:
    """In the forked child: a session of its own (the tests signal the group), output to the log,
    the test's environment, then Celery's command line as `python -m celery` runs it."""
    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.path.insert(0, cwd)
    sys.argv = ["celery", *args]
    from celery.__main__ import main

    main()


class ForkedProcess:
    """The part of subprocess.Popen's interface the tests use, over a forked worker."""

    def __init__(self, args: list[str], env: dict, log_path, cwd):
        open(log_path, "wb").close()  # there to read as soon as this returns, as with Popen
        self._process = _forkserver().Process(target=_run_celery, args=(args, env, str(log_path), str(cwd)))
        self._process.start()
        self.pid = self._process.pid

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(["celery"], timeout)
        return self._process.exitcode

    def send_signal(self, sig) -> None:
        os.kill(self.pid, sig)
