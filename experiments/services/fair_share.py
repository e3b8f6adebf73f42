"""Fair share in the claim path: a wake-up is a free slot of its queue, and the slot goes to the
study that experiments/scheduling orders first, whichever study the wake-up named. The named study
keeps its place by sending its wake-up again; a study held by a quota keeps one wake-up polling."""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from experiments.models import Study, Team, TeamQueuePolicy, Trial
from experiments.scheduling.fair_share import Policy, Standing, Waiting, claim_order, quota_reason, wait_reason
from experiments.selectors.fair_share import jobs_on_queue, queue_standing, recent_use, running_jobs
from experiments.services.audit import audit_record
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.studies import study_locked, study_wake
from experiments.states import JobStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import DEFAULT_BACKEND, JAX_SUFFIX, queue_backend


@dataclass(frozen=True)
class Route:
    """Where a slot offered to `asking` goes: `target` (None: to nobody now, `asking` waits)."""

    asking: int
    target: int | None
    wait: str = ""  # why `asking` does not get it
    fallback: bool = True  # `asking` may take it when the target has no trial to give after all
    # Teams with a concurrency quota on the queue, as read (None: not read, check every team): only
    # their claims take the policy row's lock.
    quota_teams: frozenset | None = None

    def may_hold_quota(self, team_id: int) -> bool:
        return self.quota_teams is None or team_id in self.quota_teams

    @property
    def redirected(self) -> bool:
        return self.target is not None and self.target != self.asking


def slot_route(*, study_id: int) -> Route:
    """Who takes the slot a wake-up of `study_id` offers (or its finished trial frees): read before
    any row lock, so it costs no lock wait of its own. The study counts as waiting whenever it is
    running with a free slot, even with no wake-up counted (a stray resend is still a free slot of the
    queue); one not running is not among the waiting, and the claim path finds it has nothing to give."""
    place = _place(study_id)
    if place is None:
        return Route(study_id, study_id)
    standing = queue_standing(queue=place[0], backend=place[1], kinds=JOB_KINDS.values(), asking=study_id)
    quota_teams = frozenset(team for team, p in standing.policies.items() if p.max_concurrent is not None)
    me = next((w for w in standing.waiting if w.study_id == study_id), None)
    if me is None:
        return Route(study_id, study_id, quota_teams=quota_teams)  # every slot busy: the claim drops the duplicate
    blocked = quota_reason(standing, me.team_id)
    order = claim_order(standing) if settings.FAIR_SHARE else ([] if blocked else [me])
    if not order:
        return Route(study_id, None, wait=blocked or "", quota_teams=quota_teams)
    head = order[0]
    if head.study_id == study_id:
        return Route(study_id, study_id, quota_teams=quota_teams)
    return Route(study_id, head.study_id, wait=blocked or wait_reason(standing, me, head), fallback=not blocked,
                 quota_teams=quota_teams)


# A study's queue and backend never change: each process reads them once (a query less a claim).
_places: dict[int, tuple[str, str]] = {}


def _place(study_id: int) -> tuple[str, str] | None:
    if study_id not in _places:
        found = Study.objects.filter(pk=study_id).values_list("queue", "backend").first()
        if found is None:
            return None
        if len(_places) > 10_000:
            _places.clear()
        _places[study_id] = found
    return _places[study_id]


def slot_pass_on(route: Route) -> None:
    """The wake-up of `route.asking` went to another study: send it again (it stays pending), so
    the study keeps asking; say why it waits."""
    with transaction.atomic():
        study = study_locked(route.asking)
        if study.status != StudyStatus.RUNNING or study.wakeups_pending == 0:
            # Ended, or a wake-up it never counted (a resend raced it): spent, not sent on, so
            # extra messages die out instead of circulating while the study waits.
            Study.objects.filter(pk=study.pk).update(wakeups_pending=Greatest(F("wakeups_pending") - 1, 0))
            return
        study.queue_wait, study.last_wakeup = route.wait, timezone.now()
        study.save(update_fields=["queue_wait", "last_wakeup"])
        trial_tasks_enqueue(study_id=study.id, queue=study.task_queue)


def slot_wait(route: Route) -> None:
    """No slot for `route.asking` now (a quota)."""
    with transaction.atomic():
        slot_hold(study_locked(route.asking), route.wait)


def slot_hold(study: Study, reason: str) -> None:
    """The caller holds the study's lock. Its wake-up is spent and the study says why it waits; the
    last one left asks again after QUOTA_POLL_SECONDS, so a held study costs one message in flight,
    not one per slot (a wake-up it never counted starts no poll of its own)."""
    counted = study.wakeups_pending > 0
    study.wakeups_pending -= counted
    study.queue_wait = reason if study.status == StudyStatus.RUNNING else ""
    study.save(update_fields=["wakeups_pending", "queue_wait"])
    if counted and study.status == StudyStatus.RUNNING and study.wakeups_pending == 0:
        study_wake(study, 1, countdown=settings.QUOTA_POLL_SECONDS)


def team_quota_locked(study: Study) -> str | None:
    """Under the study's lock, the team's concurrency quota on its queue checked again under a lock
    on the policy row, so claims racing for two studies of the team cannot both pass it (the route
    read it without a lock). Why the team waits, or None."""
    policy = (TeamQueuePolicy.objects.select_for_update()
              .filter(team_id=study.team_id, queue=study.queue, max_concurrent__isnull=False).first())
    if policy is None:
        return None
    team = study.team_id
    held = (Trial.objects.filter(status=TrialStatus.RUNNING, study__team_id=team, study__queue=study.queue).count()
            + running_jobs(kinds=JOB_KINDS.values(), queue=study.queue, team_ids=[team]).get(team, 0))
    standing = Standing(queue=study.queue, now=timezone.now(), held={team: held},
                        policies={team: Policy(policy.weight, policy.max_concurrent)})
    return quota_reason(standing, team)


def job_quota_locked(*, team_id: int, queue: str) -> str | None:
    """A job's claim, as team_quota_locked for a trial's: both quotas (concurrent, device-hours this
    month) of its team on the accelerator queue its work runs on, under a lock on the policy row.
    Why the job waits, or None."""
    quotas = Q(max_concurrent__isnull=False) | Q(device_hours_per_month__isnull=False)
    if TeamQueuePolicy.objects.select_for_update().filter(quotas, team_id=team_id, queue=queue).first() is None:
        return None
    standing = queue_standing(queue=queue, backend=DEFAULT_BACKEND, kinds=JOB_KINDS.values())
    return quota_reason(standing, team_id)


# How many of a kind's queued rows the job claim path reads to order them (oldest first).
JOB_ORDER_WINDOW = 200


def job_next_in_line(*, kind, pk: int) -> int:
    """Which job of `kind` a message for the queued job `pk` claims: among the kind's jobs queued on its
    queue, the one whose team is furthest below its share (then the team that used the queue least lately,
    then the oldest job), as trials do; `pk` itself when it is not queued (the claim drops the message),
    when one team queued them all (broker order), or when its own team comes first. The caller sends `pk`
    a message of its own when another job took this one (services/jobs.job_claim)."""
    if not settings.FAIR_SHARE:
        return pk
    rows = kind.table.objects.select_related(*kind.send_related).annotate(team_of=F(kind.team))
    named = rows.filter(pk=pk, status=JobStatus.QUEUED).first()
    if named is None:
        return pk
    queue = kind.queue_of(named)
    base = queue.removesuffix(JAX_SUFFIX)
    queued = jobs_on_queue(kind, base).filter(status=JobStatus.QUEUED).values_list("pk", flat=True)
    here = [row for row in rows.filter(pk__in=queued).order_by("created", "pk")[:JOB_ORDER_WINDOW]
            if kind.queue_of(row) == queue]  # the backend too (a JAX study's jobs run on cpu-jax)
    teams = {row.team_of for row in here}
    if len(teams) < 2:
        return pk
    standing = queue_standing(queue=base, backend=queue_backend(queue), kinds=JOB_KINDS.values())
    # Waiting holds a study's id for trials; here the job's (the same ordering).
    standing.waiting = [Waiting(row.pk, row.team_of, "normal", row.created) for row in here]
    standing.usage = recent_use(base, teams, standing.now)
    order = claim_order(standing)
    return order[0].study_id if order and order[0].team_id != named.team_of else pk


class PolicyError(ValueError):
    """A share or quota a site admin set that cannot hold; nothing was changed."""


def queue_policy_errors(*, queue: str, weight, max_concurrent, device_hours_per_month) -> dict[str, str]:
    errors = {}
    if queue not in Study.Queue.values:
        errors["queue"] = "Must be cpu, gpu or tpu."
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0.01 <= weight <= 1000:
        errors["weight"] = "Must be a number from 0.01 to 1000 (1: an equal share)."
    if max_concurrent is not None and (isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int)
                                       or not 0 <= max_concurrent <= 10_000):
        errors["max_concurrent"] = "Must be a whole number from 0 to 10,000, or empty for no limit."
    if device_hours_per_month is not None and (
            isinstance(device_hours_per_month, bool) or not isinstance(device_hours_per_month, int | float)
            or not 0 <= device_hours_per_month <= 10_000_000):
        errors["device_hours_per_month"] = "Must be a number from 0 to 10,000,000, or empty for no limit."
    return errors


def queue_policy_set(*, team: Team, queue: str, weight: float = 1.0, max_concurrent: int | None = None,
                     device_hours_per_month: float | None = None, user=None) -> TeamQueuePolicy:
    """A site admin's share and quotas for one team on one queue, recorded in the team's audit log;
    they count from the next claim on (running trials are not stopped)."""
    if errors := queue_policy_errors(queue=queue, weight=weight, max_concurrent=max_concurrent,
                                     device_hours_per_month=device_hours_per_month):
        raise PolicyError(errors)
    with transaction.atomic():
        policy, created = TeamQueuePolicy.objects.select_for_update().get_or_create(team=team, queue=queue)
        before = {"weight": policy.weight, "max_concurrent": policy.max_concurrent,
                  "device_hours_per_month": policy.device_hours_per_month}
        policy.weight, policy.max_concurrent = float(weight), max_concurrent
        policy.device_hours_per_month = None if device_hours_per_month is None else float(device_hours_per_month)
        policy.updated = timezone.now()
        policy.save()
        after = {"weight": policy.weight, "max_concurrent": policy.max_concurrent,
                 "device_hours_per_month": policy.device_hours_per_month}
        changes = {k: [before[k], after[k]] for k in after if created or before[k] != after[k]}
        audit_record(verb="queue_policy.set", obj=policy, team_id=team.id, changes=changes, actor=user)
    return policy
