"""Worker rows: registered when ready, heartbeating while alive, stopped on a clean shutdown; the host's facts
(devices, versions) are the worker's to gather and pass in."""

from django.utils import timezone

from experiments.models import Worker


def worker_register(*, name: str, hostname: str, pid: int, queues: list[str], devices: list, concurrency: int,
                    versions: dict, backend: str = "", packing: dict | None = None) -> Worker:
    now = timezone.now()
    worker, _ = Worker.objects.update_or_create(
        name=name,
        defaults={
            "hostname": hostname, "pid": pid, "queues": sorted(queues), "devices": devices,
            "concurrency": concurrency, "versions": versions, "backend": backend, "packing": packing or {},
            "started": now, "last_heartbeat": now, "stopped": None,
        },
    )
    return worker


def worker_packing(*, name: str, packing: dict) -> None:
    """Trials per GPU as the worker's auto packing last decided, and why."""
    Worker.objects.filter(name=name).update(packing=packing)


def worker_heartbeat(*, name: str) -> None:
    Worker.objects.filter(name=name).update(last_heartbeat=timezone.now())


def worker_stop(*, name: str) -> None:
    Worker.objects.filter(name=name).update(stopped=timezone.now())


