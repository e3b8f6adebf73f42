"""Fair share in the claim path: a wake-up or a job's message is a free slot of its queue, and the
slot goes to the study or job that experiments/scheduling orders first, whichever one the message
named. The named one keeps its place by a message sent again; one held by a quota keeps one polling."""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from experiments.models import Study, Team, TeamQueuePolicy, Trial
from experiments.scheduling.fair_share import (
    Policy,
    Standing,
    Waiting,
    claim_order_for,
    quota_reason,
    wait_reason,
)
from experiments.selectors.fair_share import queue_standing, running_jobs
from experiments.services.audit import audit_record
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.queueing import trial_tasks_enqueue
from experiments.services.studies import study_locked, study_wake
from experiments.states import JobStatus, StudyStatus, TrialStatus
from experiments.tuning.compute_options import DEFAULT_BACKEND, JAX_SUFFIX, queue_backend


@dataclass(frozen=True)
class Route:
    """Where a slot offered to `asking` goes: `target` (None: to nobody now, `asking` waits), or
    `job` (kind name, pk), a queued job first in line."""

    asking: int
    target: int | None
    wait: str = ""  # why `asking` does not get it
    fallback: bool = True  # `asking` may take it when the target has no trial to give after all
    # Teams with a concurrency quota on the queue, as read (None: not read, check every team): only
    # their claims take the policy row's lock.
    quota_teams: frozenset | None = None
    job: tuple[str, int] | None = None

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
    me = next((w for w in standing.waiting if w.study_id == study_id and not w.kind), None)
    if me is None:
        return Route(study_id, study_id, quota_teams=quota_teams)  # every slot busy: the claim drops the duplicate
    blocked = quota_reason(standing, me.team_id)
    order = claim_order_for(standing, me) if settings.FAIR_SHARE else ([] if blocked else [me])
    if not order:
        return Route(study_id, None, wait=blocked or "", quota_teams=quota_teams)
    head = order[0]
    if head.job is not None:
        return Route(study_id, None, wait=blocked or wait_reason(standing, me, head), fallback=not blocked,
                     quota_teams=quota_teams, job=head.job)
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
    standing = queue_standing(queue=queue, backend=DEFAULT_BACKEND, kinds=JOB_KINDS.values(), queued_jobs_wait=False)
    return quota_reason(standing, team_id)


def job_next_in_line(*, kind, pk: int) -> Waiting | None:
    """What a message for the queued job `pk` of `kind` serves: the study or job of its queue that fair
    share orders first (jobs and trials of every kind in one order) when that is another team's, or
    None for its own job (its team first, not queued, beyond the window read, or fair share off). The
    caller claims that one and sends `pk` a message of its own (services/jobs.job_claim)."""
    if not settings.FAIR_SHARE:
        return None
    named = kind.table.objects.select_related(*kind.send_related).filter(pk=pk, status=JobStatus.QUEUED).first()
    if named is None:
        return None
    queue = kind.queue_of(named)
    standing = queue_standing(queue=queue.removesuffix(JAX_SUFFIX), backend=queue_backend(queue),
                              kinds=JOB_KINDS.values())
    me = next((w for w in standing.waiting if w.job == (kind.name, pk)), None)
    if me is None:
        return None
    order = claim_order_for(standing, me)
    return order[0] if order and order[0] != me else None


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
