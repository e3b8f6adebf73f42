"""Reads of worker rows: which live worker leads the reaper."""

from django.utils import timezone

from experiments.models import Worker


def worker_leads_reaper(*, name: str, now=None) -> bool:
    """The live worker with the smallest name also runs the reaper, so lost trials are reaped
    even when beat is not running (or died with the worker that ran it)."""
    now = now or timezone.now()
    alive = [w.name for w in Worker.objects.filter(stopped__isnull=True).order_by("name") if w.is_alive(now)]
    return bool(alive) and alive[0] == name
