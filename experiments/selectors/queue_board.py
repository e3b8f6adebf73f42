"""One accelerator queue as its page and the API show it: what runs, what waits in claim order and
why, with an estimated start; each team's slots, share and quotas. Other teams' rows name no
study (the fleet is shared, whose work it is is not), unless a site admin asks."""

import heapq
from datetime import timedelta
from statistics import mean

from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from experiments.models import Study, Team, Trial
from experiments.scheduling.fair_share import claim_order, quota_reason, wait_reason
from experiments.selectors.fair_share import jobs_on_queue, jobs_placed, queue_standing, running_studies
from experiments.selectors.fleet import job_facts, job_label, queue_slots
from experiments.states import JobStatus, TrialStatus
from experiments.tuning.compute_options import BACKEND_NAMES, DEFAULT_BACKEND, queue_backend, task_queue

RECENT_TRIALS = 50  # completed trials whose mean duration estimates when a slot frees


def _names(team_ids, study_ids):
    return (dict(Team.objects.filter(pk__in=team_ids).values_list("pk", "name")),
            dict(Study.objects.filter(pk__in=study_ids).values_list("pk", "name")))


def _mean_seconds(rows) -> dict:
    """Mean duration per key of (key, seconds) rows."""
    spans: dict = {}
    for key, seconds in rows:
        spans.setdefault(key, []).append(seconds)
    return {key: mean(values) for key, values in spans.items()}


def _expected_ends(queue, running, running_jobs, kinds_by_name, typical, now) -> dict[str, list]:
    """When each backend's busy slots should free, soonest first: a running trial after its own
    study's mean trial so far (the queue's recent mean for a study with none done yet), a job after
    the recent mean of its kind. Studies differ by minutes; one mean for the queue told a study
    behind long trials it would start soon."""
    by_study = _mean_seconds(Trial.objects.filter(study_id__in={r["study_id"] for r in running},
                                                  status=TrialStatus.COMPLETED, duration_seconds__isnull=False)
                             .values_list("study_id", "duration_seconds"))
    by_kind = {}
    for name in {j["key"][0] for j in running_jobs}:
        # Of this queue, finished in the last 30 days: a bounded read on every refresh of the page.
        recent = (jobs_on_queue(kinds_by_name[name], queue)
                  .filter(status=JobStatus.COMPLETED, duration_seconds__isnull=False,
                          finished__gte=now - timedelta(days=30))
                  .order_by("-finished").values_list("duration_seconds", flat=True)[:RECENT_TRIALS])
        by_kind[name] = mean(recent) if recent else typical
    ends: dict[str, list] = {}
    for backend, started, seconds in ([(r["study__backend"], r["started"], by_study.get(r["study_id"], typical))
                                       for r in running]
                                      + [(j["backend"], j["started"], by_kind[j["key"][0]]) for j in running_jobs]):
        if seconds is not None:
            ends.setdefault(backend, []).append(started + timedelta(seconds=seconds))
    return {backend: sorted(times) for backend, times in ends.items()}


def _estimated_starts(order, backend_of, slots, free, ends, typical, now) -> list:
    """Each waiting row's estimated start, in claim order: each backend's slots as a heap of the times
    they free (its free ones now; a busy one at its run's expected end, one past it a moment from now:
    "now" only for a slot that is free), each row taking the soonest and holding it for the typical
    trial (so estimates never go back down the list; a slot of the other backend never runs it).
    Of more runs than slots (a dead worker's not reaped yet) the soonest ends count, one a slot.
    None where nothing can be said (no live slot of its backend; no free one and no trial done on
    the queue yet)."""
    heaps = {}
    for backend, count in slots.items():
        soon = now + timedelta(seconds=1)
        busy = [max(end, soon) for end in ends.get(backend, [])][:max(count - free.get(backend, 0), 0)]
        heaps[backend] = [now] * free.get(backend, 0) + busy
        heapq.heapify(heaps[backend])
    starts = []
    for w in order:
        heap = heaps.get(backend_of[w])
        if not heap or (typical is None and heap[0] > now):
            starts.append(None)  # no live slot; or no trial done on the queue to say when one frees
            continue
        if typical is None:
            starts.append(heapq.heappop(heap))  # a free slot, now
            continue
        start = heapq.heappop(heap)
        heapq.heappush(heap, start + timedelta(seconds=typical))
        starts.append(start)
    return starts


def _at_parallelism(queue: str, team: Team | None, site_admin: bool) -> list[dict]:
    """The viewer's running studies (every team's for a site admin) that have trials left but run
    as many at once as their parallelism allows: they take no slot, however many are free, and are
    not listed as waiting; said here so their team knows why."""
    if team is None and not site_admin:
        return []
    studies = (running_studies(queue).filter(running__gte=F("parallelism"), settled__lt=F("max_trials"))
               .order_by("name"))
    if not site_admin:
        studies = studies.filter(team=team)
    return list(studies.values("id", "name", "running", "parallelism"))


def queue_board(*, queue: str, team: Team | None, kinds=(), site_admin: bool = False, now=None) -> dict:
    """`kinds`: services/job_kinds.py's JOB_KINDS (a selector does not import services)."""
    now = now or timezone.now()
    standing, backend_of = None, {}
    for backend in BACKEND_NAMES:
        one = queue_standing(queue=queue, backend=backend, kinds=kinds, now=now)
        backend_of.update({w: backend for w in one.waiting})
        if standing is None:
            standing = one
        else:
            standing.waiting += one.waiting
    running = list(Trial.objects.filter(status=TrialStatus.RUNNING, study__queue=queue).order_by("started")
                   .values("pk", "number", "study_id", "study__team_id", "study__backend", "started"))
    # The jobs (retrains, re-runs, predictions, ...) running on the queue hold the same slots as trials.
    running_jobs = [{"key": (kind.name, pk), "team_id": team_id, "started": since, "backend": queue_backend(runs_on)
                     if runs_on else DEFAULT_BACKEND}
                    for kind, pk, team_id, since, runs_on in jobs_placed(kinds=kinds, queue=queue,
                                                                         status=JobStatus.RUNNING)]
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
    busy = {backend: sum(r["study__backend"] == backend for r in running)
            + sum(j["backend"] == backend for j in running_jobs) for backend in BACKEND_NAMES}
    free = {backend: max(slots_by_backend[backend] - busy[backend], 0) for backend in BACKEND_NAMES}
    order = claim_order(standing)
    held_back = [w for w in standing.waiting if w not in order]

    def shown(team_id: int) -> bool:
        return site_admin or (team is not None and team_id == team.id)

    jobs = [(j["key"], j["team_id"]) for j in running_jobs] + [(w.job, w.team_id) for w in standing.waiting]
    facts = job_facts([key for key, team_id in jobs if key and shown(team_id)], kinds_by_name)
    teams, studies = _names({*standing.held, *(w.team_id for w in standing.waiting), *standing.policies},
                            {*(r["study_id"] for r in running), *(w.study_id for w in standing.waiting if not w.kind),
                             *(fact["study_id"] for fact in facts.values() if fact["study_id"])})

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
        return {"job": job_label(kind, pk, facts),
                "job_url": reverse(kind.page, args=[pk]) if kind.page and own else None}

    def waiting_row(w, row: dict) -> dict:
        return named({**row, "priority": w.priority, "since": w.since, **job_fields(w.job, w.team_id)}, w.team_id,
                     None if w.kind else w.study_id)

    ends = _expected_ends(queue, running, running_jobs, kinds_by_name, typical, now)
    starts = _estimated_starts(order, backend_of, slots_by_backend, free, ends, typical, now)
    waiting = []
    heads = {}  # each backend's first in line: a row waits behind work its slots can run
    for w in order:
        heads.setdefault(backend_of[w], w)
    for position, (w, start) in enumerate(zip(order, starts, strict=True)):
        head = heads[backend_of[w]]
        reason = "Next for a free slot." if w == head else wait_reason(standing, w, head)
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
            # A running job's study (a retrain's, a prediction's model's) in the Study column, to its team.
            + [named({"trial_pk": None, "number": None, "since": j["started"], **job_fields(j["key"], j["team_id"])},
                     j["team_id"], facts.get(j["key"], {}).get("study_id")) for j in running_jobs],
            "waiting": waiting, "teams": team_rows, "at_parallelism": _at_parallelism(queue, team, site_admin)}

