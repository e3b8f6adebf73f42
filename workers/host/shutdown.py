"""Graceful shutdown: on SIGTERM each running job stops at its next epoch end and hands its work back, through a
flag byte every pool child shares (docs/design/job-lifecycle.md)."""

import logging
import mmap
import os
import signal
from contextlib import contextmanager

log = logging.getLogger(__name__)

_FLAG = mmap.mmap(-1, 1)  # MAP_SHARED | MAP_ANONYMOUS: inherited by forked children, writes seen by all
_MAIN_PID = os.getpid()  # imported by the main process before the pool forks
_child_asked = [False]  # this pool child itself got SIGTERM during its job


def request_stop() -> None:
    """The main process is shutting down (Celery's worker_shutting_down)."""
    if not _FLAG[0]:
        log.warning("shutting down: running trials stop at their next epoch end and go back to their studies")
    _FLAG[0] = 1


def stop_requested() -> bool:
    return _FLAG[0] == 1 or _child_asked[0]


def _child_sigterm(_signum, _frame) -> None:
    _child_asked[0] = True  # no logging here: a signal handler must not take the logging lock


@contextmanager
def stop_at_epoch_end_on_sigterm():
    """Around a job in a pool child, where billiard's own SIGTERM handler leaves the only place for ours: the job stops
    at its epoch end."""
    if os.getpid() == _MAIN_PID:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _child_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        _child_asked[0] = False
