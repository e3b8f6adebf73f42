"""One queue's standing for the claim path and the queue page: the slots each team holds, the
studies waiting for one, and the teams' policies and device-hours this month."""

from django.db.models import Count, F, Q, Sum
from django.utils import timezone

from experiments.models import Study, TeamQueuePolicy, Trial
from experiments.scheduling.fair_share import Policy, Standing, Waiting, month_start
from experiments.states import StudyStatus, TrialStatus


def queue_standing(*, queue: str, backend: str, now=None, asking: int | None = None) -> Standing:
    """Slots are counted on the accelerator queue (both backends' workers share its devices and its
    quotas); the waiting studies are those a worker of `backend` can run: a wake-up in flight and a
    free slot (`asking` with a free slot counts as waiting without a wake-up counted)."""
    now = now or timezone.now()
    standing = Standing(queue=queue, now=now)
    for team_id, held in (Trial.objects.filter(status=TrialStatus.RUNNING, study__queue=queue)
                          .values_list("study__team_id").annotate(n=Count("id")).order_by()):
        standing.held[team_id] = held
    asks = Q(wakeups_pending__gt=0) | Q(pk=asking) if asking is not None else Q(wakeups_pending__gt=0)
    waiting = (Study.objects.filter(asks, status=StudyStatus.RUNNING, queue=queue, backend=backend)
               .annotate(running=Count("trials", filter=Q(trials__status=TrialStatus.RUNNING)))
               .filter(running__lt=F("parallelism")).order_by()
               .values_list("id", "team_id", "priority", "started", "created"))
    standing.waiting = [Waiting(study_id, team_id, priority, started or created)
                        for study_id, team_id, priority, started, created in waiting]
    hour_quotas = []
    for policy in TeamQueuePolicy.objects.filter(queue=queue):
        standing.policies[policy.team_id] = Policy(policy.weight, policy.max_concurrent, policy.device_hours_per_month)
        if policy.device_hours_per_month is not None:
            hour_quotas.append(policy.team_id)
    if hour_quotas:
        spent = (Trial.objects.filter(study__queue=queue, study__team_id__in=hour_quotas,
                                      finished__gte=month_start(now), device_seconds__isnull=False)
                 .values_list("study__team_id").annotate(s=Sum("device_seconds")).order_by())
        standing.device_hours = {team_id: seconds / 3600 for team_id, seconds in spent}
        # Running trials count too, from the month's start or theirs: else a team with no
        # concurrency quota could start any number of trials before the hours trip.
        for team_id, started, devices in (Trial.objects.filter(status=TrialStatus.RUNNING, study__queue=queue,
                                                               study__team_id__in=hour_quotas)
                                          .values_list("study__team_id", "started", "study__devices_per_trial")):
            elapsed = (now - max(started, month_start(now))).total_seconds() * max(devices, 1)
            standing.device_hours[team_id] = standing.device_hours.get(team_id, 0.0) + max(elapsed, 0) / 3600
    return standing
