"""One accelerator queue as its page and the API show it: what runs, what waits in claim order and
why, with an estimated start; each team's slots, share and quotas. Other teams' rows name no
study (the fleet is shared, whose work it is is not), unless a site admin asks."""

from datetime import timedelta
from statistics import mean

from django.db.models.functions import Coalesce
from django.urls import reverse
from django.utils import timezone

from experiments.models import Study, Team, Trial
from experiments.scheduling.fair_share import claim_order, quota_reason, wait_reason
from experiments.selectors.fair_share import jobs_on_queue, queue_standing
from experiments.selectors.fleet import queue_slots
from experiments.states import JobStatus, TrialStatus
from experiments.tuning.compute_options import BACKEND_NAMES, task_queue

RECENT_TRIALS = 50  # completed trials whose mean duration estimates when a slot frees


def _names(team_ids, study_ids):
    return (dict(Team.objects.filter(pk__in=team_ids).values_list("pk", "name")),
            dict(Study.objects.filter(pk__in=study_ids).values_list("pk", "name")))


def _running_jobs(kinds, queue: str) -> list[dict]:
    """The jobs (retrains, re-runs, predictions, ...) running on the queue: they hold the same slots
    as trials (the queued ones wait in the same claim order, queue_standing)."""
    running = []
    for kind in kinds:
        # Since its current attempt started (a job handed back and claimed again runs anew).
        for pk, team_id, started in (jobs_on_queue(kind, queue).filter(status=JobStatus.RUNNING)
                                     .values_list("pk", kind.team, Coalesce("attempt_started", "started"))):
            running.append({"key": (kind.name, pk), "team_id": team_id, "started": started})
    return running


def queue_board(*, queue: str, team: Team | None, kinds=(), site_admin: bool = False, now=None) -> dict:
    """`kinds`: services/job_kinds.py's JOB_KINDS (a selector does not import services)."""
    now = now or timezone.now()
    standings = [queue_standing(queue=queue, backend=backend, kinds=kinds, now=now) for backend in BACKEND_NAMES]
    standing = standings[0]
    for other in standings[1:]:
        standing.waiting += other.waiting
    running = list(Trial.objects.filter(status=TrialStatus.RUNNING, study__queue=queue)
                   .order_by("started").values("pk", "number", "study_id", "study__team_id", "started"))
    running_jobs = _running_jobs(kinds, queue)
    kinds_by_name = {kind.name: kind for kind in kinds}
    # A job claimed between the two reads is running, not waiting: listed once.
    started = {job["key"] for job in running_jobs}
    standing.waiting = [w for w in standing.waiting if w.job not in started]
    durations = list(Trial.objects.filter(status=TrialStatus.COMPLETED, study__queue=queue,
                                          duration_seconds__isnull=False)
                     .order_by("-finished").values_list("duration_seconds", flat=True)[:RECENT_TRIALS])
    typical = mean(durations) if durations else None
    live = queue_slots(now=now)
    # Each backend's workers take only its studies: a JAX slot never runs a TensorFlow trial.
    slots_by_backend = {backend: live.get(task_queue(queue, backend), 0) for backend in BACKEND_NAMES}
    slots = sum(slots_by_backend.values())
    order = claim_order(standing)
    held_back = [w for w in standing.waiting if w not in order]
    teams, studies = _names({*standing.held, *(w.team_id for w in standing.waiting), *standing.policies},
                            {*(r["study_id"] for r in running), *(w.study_id for w in standing.waiting if not w.kind)})

    def shown(team_id: int) -> bool:
        return site_admin or (team is not None and team_id == team.id)

    def named(row: dict, team_id: int, study_id: int | None) -> dict:
        visible = shown(team_id)
        return {"job": None, "job_url": None, **row, "team": teams.get(team_id) if visible else None,
                "mine": team is not None and team_id == team.id, "study_id": study_id if visible else None,
                "study": studies.get(study_id) if visible else None}

    def job_fields(key: tuple[str, int] | None, team_id: int) -> dict:
        """A job's kind and number, to its own team (or a site admin), and its page to its own team
        (the only one that may open it)."""
        if key is None or not shown(team_id):
            return {"job": None, "job_url": None}
        kind, pk = kinds_by_name[key[0]], key[1]
        own = team is not None and team_id == team.id
        return {"job": f"{kind.label} {pk}", "job_url": reverse(kind.page, args=[pk]) if kind.page and own else None}

    def waiting_row(w, row: dict) -> dict:
        return named({**row, "priority": w.priority, "since": w.since, **job_fields(w.job, w.team_id)}, w.team_id,
                     None if w.kind else w.study_id)

    frees = sorted(max(r["started"] + timedelta(seconds=typical), now) for r in running) if typical else []
    busy = len(running) + len(running_jobs)
    waiting = []
    for position, w in enumerate(order):
        if typical is None:
            start = None
        elif position < max(slots - busy, 0):
            start = now
        elif frees and slots:
            rounds, index = divmod(position - max(slots - busy, 0), max(len(frees), 1))
            start = frees[index] + timedelta(seconds=rounds * typical)
        else:
            start = None
        reason = "Next for a free slot." if position == 0 else wait_reason(standing, w, order[0])
        waiting.append(waiting_row(w, {"position": position + 1, "reason": reason, "estimated_start": start}))
    for w in held_back:
        waiting.append(waiting_row(w, {"position": None, "reason": quota_reason(standing, w.team_id),
                                       "estimated_start": None}))
    weights = {tid: standing.policy(tid).weight for tid in {*standing.held, *(w.team_id for w in standing.waiting)}}
    total = sum(weights.values()) or 1
    team_rows = []
    # Shown teams by name, the others by id: their names must not show even as an order.
    for team_id in sorted(weights, key=lambda tid: (not shown(tid), teams.get(tid, "") if shown(tid) else tid)):
        policy = standing.policy(team_id)
        team_rows.append({"team": teams.get(team_id) if shown(team_id) else None, "mine": team is not None
                          and team_id == team.id, "held": standing.held.get(team_id, 0),
                          "share": round(weights[team_id] / total, 3), "weight": policy.weight,
                          "max_concurrent": policy.max_concurrent,
                          "device_hours_per_month": policy.device_hours_per_month,
                          "device_hours_spent": round(standing.device_hours.get(team_id, 0.0), 3)})
    return {"queue": queue, "now": now, "slots": slots, "typical_trial_seconds": typical,
            "slots_by_backend": slots_by_backend, "site_admin": site_admin,
            "running": [named({"trial_pk": r["pk"] if shown(r["study__team_id"]) else None,
                               "number": r["number"] if shown(r["study__team_id"]) else None,
                               "since": r["started"]}, r["study__team_id"], r["study_id"]) for r in running]
            + [named({"trial_pk": None, "number": None, "since": j["started"], **job_fields(j["key"], j["team_id"])},
                     j["team_id"], None) for j in running_jobs],
            "waiting": waiting, "teams": team_rows}

