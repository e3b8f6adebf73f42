"""One queue's standing for the claim path and the queue page: the slots each team holds, the
studies and jobs waiting for one, and the teams' policies and device-hours this month."""

from datetime import timedelta

from django.conf import settings
from django.db.models import CharField, Count, DateTimeField, DurationField, ExpressionWrapper, F, Q, Sum, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from experiments.models import Study, Team, TeamQueuePolicy, Trial
from experiments.scheduling.fair_share import Policy, Standing, Waiting, month_start
from experiments.states import JobStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import JAX_SUFFIX, task_queue

# The trials of a study that need no slot again: running or ended for good. A lost one ends for good
# only when its tuner has said so (KerasTuner marks it FAILED once its retries are spent; the attempt
# number cannot tell, as preempted and handed-back attempts count no retry); one not yet told, or
# handed back, runs again.
SETTLED = (Q(trials__status__in=(TrialStatus.RUNNING, TrialStatus.COMPLETED, TrialStatus.FAILED, TrialStatus.PRUNED))
           | Q(trials__status=TrialStatus.LOST, trials__kt_state__status="FAILED"))


def running_studies(queue: str):
    """The running studies on the queue, each with its running and settled trials counted."""
    return (Study.objects.filter(status=StudyStatus.RUNNING, queue=queue)
            .annotate(running=Count("trials", filter=Q(trials__status=TrialStatus.RUNNING)),
                      settled=Count("trials__trial_id", distinct=True, filter=SETTLED)))


def queue_standing(*, queue: str, backend: str, kinds=(), now=None, asking: int | None = None,
                   queued_jobs_wait: bool = True) -> Standing:
    """Slots are counted on the accelerator queue (both backends' workers share its devices and its
    quotas), the running jobs of `kinds` (services/job_kinds.py's JOB_KINDS, given by the caller)
    holding them as trials do; the waiting are what a worker of `backend` can run: the studies with a
    wake-up in flight and a free slot (`asking` with a free slot counts as waiting without a wake-up
    counted) and, unless `queued_jobs_wait` is False (a caller that reads only the slots held), the
    queued jobs of `kinds`. The running studies in one query, the running jobs in another, the queued
    ones in a third, the policies in a fourth; with several teams waiting, their recent use."""
    now = now or timezone.now()
    standing = Standing(queue=queue, now=now)
    studies = (running_studies(queue).order_by()
               .values_list("id", "team_id", "priority", "started", "created", "backend", "parallelism",
                            "wakeups_pending", "running", "settled", "max_trials"))
    for study_id, team_id, priority, started, created, on, parallelism, pending, running, settled, budget in studies:
        if running:
            standing.held[team_id] = standing.held.get(team_id, 0) + running
        # A study whose every trial has started (none left to retry) has no trial to give a slot,
        # however many wake-ups are still on their way: it neither waits on the page nor draws a
        # slot or a preemption away from work that can use it.
        if on == backend and running < parallelism and settled < budget and (pending > 0 or study_id == asking):
            standing.waiting.append(Waiting(study_id, team_id, priority, started or created))
    for team_id, running in running_jobs(kinds=kinds, queue=queue).items():
        standing.held[team_id] = standing.held.get(team_id, 0) + running
    if queued_jobs_wait:
        standing.waiting += queued_jobs(kinds=kinds, queue=queue, backend=backend)
    teams = {w.team_id for w in standing.waiting}
    if len(teams) > 1:
        standing.usage = recent_use(queue, teams, now)
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
        for team_id, hours in job_device_hours(kinds=kinds, queue=queue, team_ids=hour_quotas, now=now).items():
            standing.device_hours[team_id] = standing.device_hours.get(team_id, 0.0) + hours
    return standing


def jobs_on_queue(kind, queue: str):
    """The rows of a job kind whose work runs on the accelerator `queue`: that of the study they follow
    (kind.study), else the kind's own queue (kind.queue), or the row's own (kind.queue_column)."""
    rows = kind.table.objects.all()
    if kind.queue_column is not None:
        return rows.filter(**{f"{kind.queue_column}__in": (queue, f"{queue}{JAX_SUFFIX}")})
    own = kind.queue is not None and kind.queue.removesuffix(JAX_SUFFIX) == queue
    if kind.study is None:
        return rows if own else rows.none()
    here = Q(**{f"{kind.study}__queue": queue})
    return rows.filter(here | Q(**{f"{kind.study}__isnull": True}) if own else here)


def running_jobs(*, kinds, queue: str, team_ids=None) -> dict[int, int]:
    """Running jobs per team on the queue, every kind in one query."""
    counts = []
    for kind in kinds:
        rows = jobs_on_queue(kind, queue).filter(status=JobStatus.RUNNING)
        if team_ids is not None:
            rows = rows.filter(**{f"{kind.team}__in": team_ids})
        counts.append(rows.values_list(kind.team).annotate(n=Count("id")).order_by())
    if not counts:
        return {}
    held: dict[int, int] = {}
    for team_id, n in counts[0].union(*counts[1:], all=True):
        held[team_id] = held.get(team_id, 0) + n
    return held


# How many queued jobs of a queue a claim reads to order them (the oldest): a bound on one claim's
# work however many are queued (those beyond it wait their turn in the window).
JOB_ORDER_WINDOW = 500


def queued_jobs(*, kinds, queue: str, backend: str) -> list[Waiting]:
    """The queued jobs of `kinds` that a worker of `backend` on the accelerator `queue` runs, oldest
    first."""
    target = task_queue(queue, backend)
    return [Waiting(pk, team_id, "normal", created, kind=kind.name)
            for kind, pk, team_id, created, runs_on in jobs_placed(kinds=kinds, queue=queue, status=JobStatus.QUEUED)
            if runs_on == target]


def jobs_placed(*, kinds, queue: str, status: str) -> list[tuple]:
    """(kind, pk, team id, since, Celery queue) of the jobs of `kinds` in `status` on the accelerator
    `queue`, oldest first (since: created when queued, the current attempt's start when running),
    every kind in one query. What decides a row's Celery queue (and so its backend) is read with it
    (its study's backend, or its own queue column); only a row the query cannot place (an
    ensemble's, which runs where its members trained) is loaded to ask its kind."""
    kinds = list(kinds)
    if not kinds:
        return []
    since = F("created") if status == JobStatus.QUEUED else Coalesce("attempt_started", "started", "created")
    parts = []
    for number, kind in enumerate(kinds):
        if kind.queue_column is not None:
            hint = F(kind.queue_column)
        elif kind.study is not None:
            hint = F(f"{kind.study}__backend")
        else:
            hint = Value(None, output_field=CharField())
        # Annotations only, in the order selected: the union's columns line up by position.
        parts.append(jobs_on_queue(kind, queue).filter(status=status).order_by()
                     .annotate(job_kind=Value(number), job_pk=F("pk"), job_team=F(kind.team),
                               job_since=since, job_hint=hint)
                     .values_list("job_kind", "job_pk", "job_team", "job_since", "job_hint"))
    rows = parts[0].union(*parts[1:], all=True).order_by("job_since", "job_pk")[:JOB_ORDER_WINDOW]
    rows = list(rows)
    unplaced: dict[int, list[int]] = {}  # kind number -> its rows the query could not place
    for number, pk, _team_id, _since, hint in rows:
        if kinds[number].queue_column is None and kinds[number].study is not None and not hint:
            unplaced.setdefault(number, []).append(pk)
    placed = {}
    for number, pks in unplaced.items():  # one query a kind (an ensemble's queue is cached: job_kinds.model_queue)
        kind = kinds[number]
        for row in kind.table.objects.select_related(*kind.send_related).filter(pk__in=pks):
            placed[number, row.pk] = kind.queue_of(row)
    jobs = []
    for number, pk, team_id, since, hint in rows:
        kind = kinds[number]
        if kind.queue_column is not None:
            runs_on = hint
        elif kind.study is None:
            runs_on = kind.queue
        else:
            runs_on = task_queue(queue, hint) if hint else placed.get((number, pk))
        jobs.append((kind, pk, team_id, since, runs_on))
    return jobs


def job_device_hours(*, kinds, queue: str, team_ids, now) -> dict[int, float]:
    """Device-hours the teams' jobs spent on the queue this calendar month: the runs they recorded
    (each run adds its device-seconds when it ends, finished, failed or handed back) of the jobs that
    ended this month or have not ended, and the run in progress of a running job from its attempt's
    start (or the month's) on the devices its worker child holds (attempt_devices, as it will record)."""
    active = Q(status__in=(JobStatus.QUEUED, JobStatus.RUNNING)) | Q(finished__gte=month_start(now))
    hours: dict[int, float] = {}
    for kind in kinds:
        rows = jobs_on_queue(kind, queue).filter(**{f"{kind.team}__in": team_ids})
        spent = (rows.filter(active, device_seconds__isnull=False)
                 .values_list(kind.team).annotate(s=Sum("device_seconds")).order_by())
        for team_id, seconds in spent:
            hours[team_id] = hours.get(team_id, 0.0) + seconds / 3600
        running = rows.filter(status=JobStatus.RUNNING, attempt_started__isnull=False)
        for team_id, started, devices in running.values_list(kind.team, "attempt_started", "attempt_devices"):
            elapsed = (now - max(started, month_start(now))).total_seconds() * devices
            hours[team_id] = hours.get(team_id, 0.0) + max(elapsed, 0) / 3600
    return hours


def recent_use(queue: str, teams: set[int], now) -> dict[int, float]:
    """Slot-seconds each team's trials held on the queue over the last FAIR_SHARE_WINDOW_SECONDS: it
    breaks ties between teams holding equal shares now, so a spare slot goes round instead of to the
    oldest study's team every time."""
    since = now - timedelta(seconds=settings.FAIR_SHARE_WINDOW_SECONDS)
    held = ExpressionWrapper(Coalesce("finished", Value(now, output_field=DateTimeField()))
                             - Greatest("started", Value(since, output_field=DateTimeField())),
                             output_field=DurationField())
    rows = (Trial.objects.filter(Q(status=TrialStatus.RUNNING) | Q(finished__gt=since), study__queue=queue,
                                 study__team_id__in=teams).values_list("study__team_id")
            .annotate(held=Sum(held)).order_by())
    return {team_id: used.total_seconds() for team_id, used in rows if used is not None}


def queue_policies(*, queue: str) -> list[tuple[Team, TeamQueuePolicy | None]]:
    """Every team by name with its policy on `queue` (None: the defaults), idle teams too: a site
    admin sets a quota before a team's study arrives."""
    policies = {policy.team_id: policy for policy in TeamQueuePolicy.objects.filter(queue=queue)}
    return [(team, policies.get(team.pk)) for team in Team.objects.order_by("name")]
