"""Reads of the worker fleet: trial slots per queue, a study's capacity, who runs what."""

from datetime import timedelta

from django.conf import settings
from django.db.models import JSONField, OuterRef, Subquery
from django.utils import timezone

from experiments.models import JobLog, JobSample, Study, Team, Trial, Worker


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


def fleet_rows(*, team: Team, now=None) -> list[dict]:
    """Every registered worker (the fleet is shared), whether it is alive, the trials of this
    team it is running, and how many trials of other teams (never which)."""
    now = now or timezone.now()
    running, others = {}, {}
    for trial in Trial.objects.filter(status=Trial.Status.RUNNING).select_related("study").order_by("number"):
        if trial.study.team_id == team.id:
            running.setdefault(trial.worker_name, []).append(trial)
        else:
            others[trial.worker_name] = others.get(trial.worker_name, 0) + 1
    live = fleet_live(now=now)
    return [
        {"worker": w, "alive": w.is_alive(now), "trials": running.get(w.name, []), "other_teams": others.get(w.name, 0),
         "live": live.get(w.name)}
        for w in Worker.objects.all()
    ]


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
