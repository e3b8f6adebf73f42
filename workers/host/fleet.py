"""Worker registration, heartbeat and reaper, from the main Celery process (which never loads
TensorFlow: it forks the children that do)."""

import logging
import os
import socket
import time

from django.conf import settings

from experiments.selectors.fleet import worker_leads_reaper
from experiments.services.connections import connection_close
from experiments.services.fleet import worker_heartbeat, worker_register, worker_stop
from workers.host.backends.selection import worker_backend
from workers.host.devices import host_devices
from workers.host.heartbeat import Heartbeat
from workers.host.packing import packing_record
from workers.host.reaper import reap
from workers.host.versions import package_versions

log = logging.getLogger(__name__)


class _WorkerBeat:
    """One tick of the heartbeat thread: the worker's heartbeat and, on the leader, the reaper, in the main process
    because on a loaded host no pool slot is free."""

    def __init__(self, name: str):
        self.worker_name = name
        self.last_beat = self.last_reap = time.monotonic()

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last_beat >= settings.WORKER_HEARTBEAT_SECONDS:
            worker_heartbeat(name=self.worker_name)
            self.last_beat = now
        if now - self.last_reap >= settings.REAPER_INTERVAL_SECONDS and worker_leads_reaper(name=self.worker_name):
            self.last_reap = now
            reap()


_heartbeat: Heartbeat | None = None


def on_worker_ready(consumer) -> None:
    global _heartbeat
    queues = [q.name for q in consumer.app.amqp.queues.consume_from.values()]
    concurrency = getattr(consumer.pool, "limit", None) or consumer.app.conf.worker_concurrency or 1
    try:
        worker_register(name=consumer.hostname, hostname=socket.gethostname(), pid=os.getpid(), queues=queues,
                        devices=host_devices(), concurrency=int(concurrency), versions=package_versions(),
                        backend=worker_backend(), packing=packing_record())
    except Exception:
        log.exception("could not register worker %s", consumer.hostname)
    finally:
        connection_close()  # never hand a connection to forked children
    _heartbeat = Heartbeat(_WorkerBeat(consumer.hostname),
                           min(settings.WORKER_HEARTBEAT_SECONDS, settings.REAPER_INTERVAL_SECONDS),
                           name="tuneboard-worker-heartbeat")
    _heartbeat.start()


def on_worker_shutdown(name: str) -> None:
    if _heartbeat is not None:
        _heartbeat.stop(wait=False)
    try:
        worker_stop(name=name)
    except Exception:
        log.warning("could not mark worker %s stopped", name, exc_info=True)
