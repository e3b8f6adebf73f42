"""The shutdown flag crosses the fork (main process -> pool children), and a pool child asked
to stop by SIGTERM during a job carries on to the epoch end instead of dying, while an idle
child keeps SIGTERM's usual meaning. Real forked processes, no Celery needed."""

import multiprocessing
import os
import signal
import time

import pytest

from workers.host import shutdown

fork = multiprocessing.get_context("fork")


@pytest.fixture(autouse=True)
def clear_flag():
    shutdown._FLAG[0] = 0
    yield
    shutdown._FLAG[0] = 0


def _wait_for_flag(seen):
    deadline = time.monotonic() + 10
    while not shutdown.stop_requested() and time.monotonic() < deadline:
        time.sleep(0.01)
    seen.value = int(shutdown.stop_requested())


def test_a_child_forked_before_the_stop_sees_the_main_process_ask_for_it():
    seen = fork.Value("i", -1)
    child = fork.Process(target=_wait_for_flag, args=(seen,))
    child.start()
    time.sleep(0.2)
    assert not shutdown.stop_requested()
    shutdown.request_stop()
    child.join(10)
    assert seen.value == 1


def _job_until_asked(ready, seen):
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what billiard leaves an idle child with (exit)
    with shutdown.stop_at_epoch_end_on_sigterm():
        ready.set()
        _wait_for_flag(seen)
    os._exit(0 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL and not shutdown._child_asked[0] else 3)


def test_sigterm_to_a_child_mid_job_asks_for_the_stop_and_the_child_lives_on():
    ready, seen = fork.Event(), fork.Value("i", -1)
    child = fork.Process(target=_job_until_asked, args=(ready, seen))
    child.start()
    assert ready.wait(10)
    os.kill(child.pid, signal.SIGTERM)
    child.join(10)
    assert seen.value == 1  # the job saw the request ...
    assert child.exitcode == 0  # ... was not killed by the signal, and the idle handler came back


def test_in_the_main_process_the_job_leaves_celerys_own_handler_alone():
    before = signal.getsignal(signal.SIGTERM)
    with shutdown.stop_at_epoch_end_on_sigterm():
        assert signal.getsignal(signal.SIGTERM) is before
