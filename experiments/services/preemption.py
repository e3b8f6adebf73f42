"""Preemption, on the queues TUNEBOARD_PREEMPT_QUEUES names: when every slot of a queue is busy and
the study or job first in fair-share order waits, one running trial of a team over its share is asked to
stop at its next epoch end (Trial.preempted); the worker keeps its weights and state, hands it back
without penalty, and its next attempt goes on from that epoch (docs/design/fair-share.md)."""

import logging

from django.conf import settings
from django.utils import timezone

from experiments.models import Artifact, Trial
from experiments.scheduling.fair_share import Running, claim_order, preemption_victim
from experiments.selectors.fair_share import queue_standing
from experiments.selectors.fleet import queue_slots
from experiments.services.artifacts import artifacts_delete
from experiments.services.job_kinds import JOB_KINDS
from experiments.states import StudyStatus, TrialStatus
from experiments.tuning.compute_options import BACKEND_NAMES, task_queue

log = logging.getLogger(__name__)


def trials_preempt(*, now=None) -> int:
    """One reaper pass: at most one trial asked to stop per queue and backend, and none while an
    earlier one asked is still running (so a pass never stops more than the waiting study needs)."""
    if not settings.PREEMPT_QUEUES or not settings.FAIR_SHARE:
        return 0  # without fair share the freed slot would go to whichever wake-up came first
    now = now or timezone.now()
    slots = queue_slots(now=now)
    asked = 0
    for queue in settings.PREEMPT_QUEUES:
        for backend in BACKEND_NAMES:
            asked += _preempt_one(queue, backend, slots.get(task_queue(queue, backend), 0), now)
    return asked


def _preempt_one(queue: str, backend: str, slots: int, now) -> int:
    rows = list(Trial.objects.filter(status=TrialStatus.RUNNING, study__queue=queue, study__backend=backend,
                                     study__status=StudyStatus.RUNNING)
                .values("pk", "preempted", "started", "study__team_id", "study__priority",
                        "study__executions_per_trial"))
    if not slots or len(rows) < slots or any(row["preempted"] for row in rows):
        return 0  # a free slot (the waiting study gets it), or a stop already asked
    # Jobs count in the standing: a team at its quota through its jobs is not first in line (a stop
    # for it would free a slot it may not take). The slots compared are trials' only: a job cannot
    # stop at an epoch end, and a slot a job holds is not one a stop could free.
    standing = queue_standing(queue=queue, backend=backend, kinds=JOB_KINDS.values(), now=now)
    order = claim_order(standing)
    if not order:
        return 0
    held: dict[int, int] = {}
    for row in rows:
        held[row["study__team_id"]] = held.get(row["study__team_id"], 0) + 1
    # Only a trial of one execution resumes where it stopped; the others are never asked.
    running = [Running(row["pk"], row["study__team_id"], row["study__priority"], row["started"])
               for row in rows if row["study__executions_per_trial"] == 1]
    teams = {*held, order[0].team_id}
    victim = preemption_victim(running=running, held=held, head=order[0], slots=slots,
                               weights={team: standing.policy(team).weight for team in teams})
    if victim is None:
        return 0
    asked = Trial.objects.filter(pk=victim, status=TrialStatus.RUNNING, preempted__isnull=True).update(preempted=now)
    if asked:
        head = order[0]
        log.info("trial %s asked to stop at its next epoch end for %s %s (queue %s)", victim,
                 head.kind or "study", head.study_id, task_queue(queue, backend))
    return asked


def trial_resume_forget(*, trial: Trial) -> None:
    """The weights a preempted attempt left, once the trial has ended for good (they are referred to
    only from Trial.resume, which stays as the record of where it went on from)."""
    ids = [trial.resume.get(name) for name in ("last_weights", "best_weights", "optimizer")]
    artifacts_delete(artifacts=Artifact.objects.filter(pk__in=[i for i in ids if i], team_id=trial.study.team_id))
