"""Reads of the worker fleet: trial slots per queue, a study's capacity, who runs what."""

from datetime import timedelta

from django.conf import settings
from django.db.models import JSONField, OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone

from experiments.models import JobLog, JobSample, Study, Team, Trial, Worker
from experiments.states import JobStatus


def queue_slots(*, now=None) -> dict[str, int]:
    """Trial slots per queue: the child processes (concurrency) of the live workers serving
    it, as each worker reported when it started. A worker serving two queues counts for both."""
    slots: dict[str, int] = {}
    for worker in Worker.objects.filter(stopped__isnull=True):
        if worker.is_alive(now):
            for queue in worker.queues:
                slots[queue] = slots.get(queue, 0) + worker.concurrency
    return slots


def queue_has_live_worker(*, queue: str, now=None) -> bool:
    return queue_slots(now=now).get(queue, 0) > 0


def study_capacity(*, study: Study, slots: dict[str, int] | None = None) -> dict:
    """How many trials the study can run at once: min(parallelism asked, slots on its queue)."""
    available = (queue_slots() if slots is None else slots).get(study.task_queue, 0)
    return {"requested": study.parallelism, "slots": available, "queue": study.task_queue,
            "effective": min(study.parallelism, available), "limited": 0 < available < study.parallelism}


def fleet_rows(*, team: Team, kinds=(), now=None) -> list[dict]:
    """Every registered worker (the fleet is shared), whether it is alive, the trials and jobs (of
    `kinds`, services/job_kinds.py's JOB_KINDS) of this team it is running, and how many trials and
    jobs of other teams (never which)."""
    now = now or timezone.now()
    running, others = {}, {}
    for trial in Trial.objects.filter(status=Trial.Status.RUNNING).select_related("study").order_by("number"):
        if trial.study.team_id == team.id:
            running.setdefault(trial.worker_name, []).append(trial)
        else:
            others[trial.worker_name] = others.get(trial.worker_name, 0) + 1
    jobs, other_jobs = _jobs_by_worker(kinds, team)
    live = fleet_live(now=now)
    return [
        {"worker": w, "alive": w.is_alive(now), "trials": running.get(w.name, []), "other_teams": others.get(w.name, 0),
         "jobs": jobs.get(w.name, []), "other_teams_jobs": other_jobs.get(w.name, 0), "live": live.get(w.name)}
        for w in Worker.objects.all()
    ]


def _jobs_by_worker(kinds, team: Team) -> tuple[dict[str, list[dict]], dict[str, int]]:
    """The running jobs on each worker: this team's named (kind, pk, label, page), the others counted.
    A job's worker is that of its current attempt's log (jobs record a host, not a worker)."""
    kinds_by_name = {kind.name: kind for kind in kinds}
    attempts: dict[str, dict[tuple[int, int], str]] = {}
    # A running run's log is written to at least every system sample: one quiet for longer is a dead
    # worker's, left open (the bound also keeps this read on the `updated` index).
    recent = timezone.now() - timedelta(minutes=15)
    for name, pk, attempt, worker in (JobLog.objects.filter(running=True, kind__in=kinds_by_name, updated__gte=recent)
                                      .exclude(worker="").values_list("kind", "job_id", "attempt", "worker")):
        attempts.setdefault(name, {})[pk, attempt] = worker
    mine: dict[str, list[dict]] = {}
    others: dict[str, int] = {}
    for name, logs in attempts.items():
        kind = kinds_by_name[name]
        for pk, team_id, attempt in (kind.table.objects.filter(pk__in={pk for pk, _ in logs}, status=JobStatus.RUNNING)
                                     .values_list("pk", kind.team, "attempts")):
            worker = logs.get((pk, attempt))
            if worker is None:
                continue  # an earlier attempt's log, left open by a worker that died
            if team_id == team.id:
                mine.setdefault(worker, []).append({"kind": name, "id": pk})
            else:
                others[worker] = others.get(worker, 0) + 1
    facts = job_facts([(job["kind"], job["id"]) for rows in mine.values() for job in rows], kinds_by_name)
    for rows in mine.values():
        for job in rows:
            kind = kinds_by_name[job["kind"]]
            job["label"] = job_label(kind, job["id"], facts)
            job["url"] = reverse(kind.page, args=[job["id"]]) if kind.page else None
    return mine, others


def job_facts(keys, kinds_by_name) -> dict[tuple[str, int], dict]:
    """Of each job (kind name, pk): the name a person knows it by (a model's name) and the study it
    follows, for the kinds that have them: a query a kind."""
    facts: dict[tuple[str, int], dict] = {}
    for name in {kind for kind, _pk in keys}:
        kind = kinds_by_name[name]
        columns = [column for column in (kind.title, kind.study and f"{kind.study}_id") if column]
        if columns:
            pks = [pk for k, pk in keys if k == name]
            for pk, *values in kind.table.objects.filter(pk__in=pks).values_list("pk", *columns):
                found = dict(zip(columns, values, strict=True))
                facts[name, pk] = {"title": found.get(kind.title),
                                   "study_id": found.get(kind.study and f"{kind.study}_id")}
    return facts


def job_label(kind, pk: int, facts: dict) -> str:
    """"model 7 (best-mlp)": its kind and number, and its name where it has one."""
    title = facts.get((kind.name, pk), {}).get("title")
    return f"{kind.label} {pk} ({title})" if title else f"{kind.label} {pk}"


def fleet_live(*, now=None) -> dict[str, dict]:
    """What each worker's running trials and jobs use now, from each run's latest system sample
    (one query): the runs' CPU % and RSS summed, and per GPU index its latest figures. Of every
    team's runs alike, and naming none: the fleet is shared, its use is not a secret, whose it is is."""
    now = now or timezone.now()
    # Three intervals, and never under 10 s: on a busy host a flush runs late, and a run whose
    # latest sample is a few seconds old is still running (its log says so until it ends).
    fresh = now - timedelta(seconds=max(10, 3 * max(settings.SYSTEM_SAMPLE_SECONDS, settings.JOB_LOG_FLUSH_SECONDS)))
    latest = JobSample.objects.filter(log=OuterRef("pk")).order_by("-at").values("values")[:1]
    logs = (JobLog.objects.filter(running=True, updated__gte=fresh).exclude(worker="")
            .annotate(latest=Subquery(latest, output_field=JSONField())).values("worker", "latest"))
    found: dict[str, dict] = {}
    for log in logs:
        values = log["latest"]
        if not isinstance(values, dict):
            continue  # a run that has not sampled yet
        row = found.setdefault(log["worker"], {"runs": 0, "cpu_percent": 0.0, "rss_bytes": 0, "gpus": {}})
        row["runs"] += 1
        row["cpu_percent"] += values.get("cpu_percent") or 0.0
        row["rss_bytes"] += values.get("rss_bytes") or 0
        for gpu in values.get("gpus", []):
            row["gpus"][gpu["index"]] = gpu  # one GPU's figures are the device's, whichever run read them
    for row in found.values():
        row["gpus"] = [row["gpus"][index] for index in sorted(row["gpus"])]
    return found


def worker_leads_reaper(*, name: str, now=None) -> bool:
    """The live worker with the smallest name also runs the reaper, so lost trials are reaped
    even when beat is not running (or died with the worker that ran it)."""
    now = now or timezone.now()
    alive = [w.name for w in Worker.objects.filter(stopped__isnull=True).order_by("name") if w.is_alive(now)]
    return bool(alive) and alive[0] == name
