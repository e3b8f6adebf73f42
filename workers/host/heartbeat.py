"""The one heartbeat thread: a running job's row heartbeat, so the reaper only sees dead workers,
and the worker's own heartbeat (with the reaper) in the main process (workers/host/fleet.py)."""

import logging
import threading
from collections.abc import Callable

from experiments.services.connections import connection_close

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """Calls `beat()` every `interval` seconds until stopped. A database blip must not kill the
    job: a failed beat is logged and its connection dropped, so the next beat reconnects."""

    def __init__(self, beat: Callable[[], object], interval: float, name: str):
        super().__init__(daemon=True, name=name)
        self.beat = beat
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    self.beat()
                except Exception:
                    log.warning("heartbeat %s failed; retrying", self.name, exc_info=True)
                    connection_close()
        finally:
            connection_close()

    def stop(self, *, wait: bool = True) -> None:
        """`wait=False` when the process is exiting anyway: its last beat need not finish."""
        self.stopped.set()
        if wait:
            self.join(timeout=5)
