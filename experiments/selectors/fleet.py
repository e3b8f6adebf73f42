"""Reads of the worker fleet: trial slots per queue, a study's capacity, who runs what."""

from django.utils import timezone

from experiments.models import Study, Team, Trial, Worker


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
    return [
        {"worker": w, "alive": w.is_alive(now), "trials": running.get(w.name, []), "other_teams": others.get(w.name, 0)}
        for w in Worker.objects.all()
    ]


def worker_leads_reaper(*, name: str, now=None) -> bool:
    """The live worker with the smallest name also runs the reaper, so lost trials are reaped
    even when beat is not running (or died with the worker that ran it)."""
    now = now or timezone.now()
    alive = [w.name for w in Worker.objects.filter(stopped__isnull=True).order_by("name") if w.is_alive(now)]
    return bool(alive) and alive[0] == name
