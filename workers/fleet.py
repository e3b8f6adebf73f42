"""Worker registration and heartbeat, from the main Celery process (which never loads
TensorFlow: it forks the children that do)."""

import logging
import os
import socket
import threading
import time

from django.conf import settings

from experiments.services.connections import connection_close
from experiments.services.worker_hosts import worker_heartbeat, worker_leads_reaper, worker_register, worker_stop
from workers.backend import worker_backend
from workers.devices import host_devices
from workers.reaper import reap
from workers.versions import package_versions

log = logging.getLogger(__name__)


class Heartbeat(threading.Thread):
    """The worker's heartbeat and, on the reaper leader, the reaper itself. Both run here, in
    the main process, rather than as tasks: a task would wait for a free pool slot, and on a
    loaded host every slot is training, which is exactly when lost work must be found."""

    def __init__(self, name: str):
        super().__init__(daemon=True, name="tuneboard-worker-heartbeat")
        self.worker_name = name
        self.stop_event = threading.Event()

    def run(self) -> None:
        last_beat = last_reap = time.monotonic()
        tick = min(settings.WORKER_HEARTBEAT_SECONDS, settings.REAPER_INTERVAL_SECONDS)
        while not self.stop_event.wait(tick):
            try:
                now = time.monotonic()
                if now - last_beat >= settings.WORKER_HEARTBEAT_SECONDS:
                    worker_heartbeat(name=self.worker_name)
                    last_beat = now
                if now - last_reap >= settings.REAPER_INTERVAL_SECONDS and worker_leads_reaper(name=self.worker_name):
                    last_reap = now
                    reap()
            except Exception:
                log.warning("worker heartbeat or reaper failed; retrying", exc_info=True)
                connection_close()  # reconnect next time (e.g. PostgreSQL restarted)
        connection_close()


_heartbeat: Heartbeat | None = None


def on_worker_ready(consumer) -> None:
    global _heartbeat
    queues = [q.name for q in consumer.app.amqp.queues.consume_from.values()]
    concurrency = getattr(consumer.pool, "limit", None) or consumer.app.conf.worker_concurrency or 1
    try:
        worker_register(name=consumer.hostname, hostname=socket.gethostname(), pid=os.getpid(), queues=queues,
                        devices=host_devices(), concurrency=int(concurrency), versions=package_versions(),
                        backend=worker_backend())
    except Exception:
        log.exception("could not register worker %s", consumer.hostname)
    finally:
        connection_close()  # never hand a connection to forked children
    _heartbeat = Heartbeat(consumer.hostname)
    _heartbeat.start()


def on_worker_shutdown(name: str) -> None:
    if _heartbeat is not None:
        _heartbeat.stop_event.set()
    try:
        worker_stop(name=name)
    except Exception:
        log.warning("could not mark worker %s stopped", name, exc_info=True)
