"""The suite's forked workers are only used where the preloaded imports are what a plain start
would have made."""

import os

from tests.conftest import ROOT
from tests.forked_workers import can_fork


def test_a_tensorflow_worker_on_the_suites_environment_is_forked():
    assert can_fork({**os.environ, "PYTHONPATH": str(ROOT), "TUNEBOARD_CPU_DEVICES": "2"}, ROOT)


def test_another_backend_pythonpath_or_thread_limit_starts_plainly():
    assert not can_fork({**os.environ, "KERAS_BACKEND": "jax"}, ROOT)
    assert not can_fork({**os.environ, "PYTHONPATH": f"/elsewhere:{ROOT}"}, ROOT)
    assert not can_fork({**os.environ, "OMP_NUM_THREADS": str(int(os.environ.get("OMP_NUM_THREADS", "1")) + 7)}, ROOT)
