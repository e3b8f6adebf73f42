"""Keeping running studies moving when the broker lost their wake-ups (a Redis restart,
a worker killed with its message unacknowledged): the database decides what should run."""

from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from experiments.models import Study, Trial
from experiments.services.queueing import trial_tasks_enqueue


def studies_kick_quiet(*, now=None) -> int:
    """Send wake-ups to running studies that had no claim or finish for KICK_AFTER_SECONDS
    and run fewer trials than their parallelism. Extra wake-ups are harmless: a task that
    finds nothing to claim exits."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.KICK_AFTER_SECONDS)
    sent = 0
    quiet = Study.objects.filter(status=Study.Status.RUNNING).filter(
        Q(last_activity__lt=cutoff) | Q(last_activity__isnull=True)
    )
    for study in quiet:
        running = Trial.objects.filter(study=study, status=Trial.Status.RUNNING).count()
        missing = study.parallelism - running
        if missing <= 0:
            continue
        # Claim the kick so two reapers do not both send.
        if Study.objects.filter(pk=study.pk, last_activity=study.last_activity).update(last_activity=now):
            trial_tasks_enqueue(study_id=study.id, queue=study.queue, count=missing)
            sent += missing
    return sent


def study_touch(*, study_id: int) -> None:
    Study.objects.filter(pk=study_id).update(last_activity=timezone.now())
