"""Worker registration and heartbeat, from the main Celery process (which never loads
TensorFlow: it forks the children that do)."""

import logging
import os
import socket
import threading
import time

from django.conf import settings
from django.db import connection
from django.utils import timezone

from experiments.models import Worker
from workers.devices import host_devices
from workers.versions import package_versions

log = logging.getLogger(__name__)


def worker_register(*, name: str, queues: list[str], concurrency: int) -> Worker:
    now = timezone.now()
    worker, _ = Worker.objects.update_or_create(
        name=name,
        defaults={
            "hostname": socket.gethostname(), "pid": os.getpid(), "queues": sorted(queues),
            "devices": host_devices(), "concurrency": concurrency, "versions": package_versions(),
            "started": now, "last_heartbeat": now, "stopped": None,
        },
    )
    return worker


def is_reaper_leader(name: str, now=None) -> bool:
    """The live worker with the smallest name also runs the reaper, so lost trials are reaped
    even when beat is not running (or died with the worker that ran it)."""
    now = now or timezone.now()
    alive = [w.name for w in Worker.objects.filter(stopped__isnull=True).order_by("name") if w.is_alive(now)]
    return bool(alive) and alive[0] == name


class Heartbeat(threading.Thread):
    """The worker's heartbeat and, on the reaper leader, the reaper itself. Both run here, in
    the main process, rather than as tasks: a task would wait for a free pool slot, and on a
    loaded host every slot is training, which is exactly when lost work must be found."""

    def __init__(self, name: str):
        super().__init__(daemon=True, name="tuneboard-worker-heartbeat")
        self.worker_name = name
        self.stop_event = threading.Event()

    def run(self) -> None:
        from workers.reaper import reap

        last_beat = last_reap = time.monotonic()
        tick = min(settings.WORKER_HEARTBEAT_SECONDS, settings.REAPER_INTERVAL_SECONDS)
        while not self.stop_event.wait(tick):
            try:
                now = time.monotonic()
                if now - last_beat >= settings.WORKER_HEARTBEAT_SECONDS:
                    Worker.objects.filter(name=self.worker_name).update(last_heartbeat=timezone.now())
                    last_beat = now
                if now - last_reap >= settings.REAPER_INTERVAL_SECONDS and is_reaper_leader(self.worker_name):
                    last_reap = now
                    reap()
            except Exception:
                log.warning("worker heartbeat or reaper failed; retrying", exc_info=True)
                connection.close()  # reconnect next time (e.g. PostgreSQL restarted)
        connection.close()


_heartbeat: Heartbeat | None = None


def on_worker_ready(consumer) -> None:
    global _heartbeat
    queues = [q.name for q in consumer.app.amqp.queues.consume_from.values()]
    concurrency = getattr(consumer.pool, "limit", None) or consumer.app.conf.worker_concurrency or 1
    try:
        worker_register(name=consumer.hostname, queues=queues, concurrency=int(concurrency))
    except Exception:
        log.exception("could not register worker %s", consumer.hostname)
    finally:
        connection.close()  # never hand a connection to forked children
    _heartbeat = Heartbeat(consumer.hostname)
    _heartbeat.start()


def on_worker_shutdown(name: str) -> None:
    if _heartbeat is not None:
        _heartbeat.stop_event.set()
    try:
        Worker.objects.filter(name=name).update(stopped=timezone.now())
    except Exception:
        log.warning("could not mark worker %s stopped", name, exc_info=True)
