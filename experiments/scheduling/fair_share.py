"""The order in which the work waiting on one queue (studies' trials and jobs alike) gets its free
slots: the team furthest below its share first (slots held / weight; between teams level on that,
the one that used the queue least lately), then the priority, then the age; a team at a quota waits."""

from dataclasses import dataclass, field
from datetime import datetime

PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}


@dataclass(frozen=True)
class Waiting:
    """A running study on the queue with a free slot it asked for (a wake-up in flight), or a queued
    job (`kind`: its JOB_KINDS name; jobs have normal priority)."""

    study_id: int  # the study's id, or the job's pk
    team_id: int
    priority: str
    since: datetime
    kind: str = ""  # "" for a study

    @property
    def job(self) -> tuple[str, int] | None:
        return (self.kind, self.study_id) if self.kind else None


@dataclass(frozen=True)
class Policy:
    weight: float = 1.0
    max_concurrent: int | None = None
    device_hours_per_month: float | None = None


@dataclass
class Standing:
    """One queue as the claim path reads it: slots each team holds, who waits, what admins set."""

    queue: str
    now: datetime
    held: dict[int, int] = field(default_factory=dict)
    waiting: list[Waiting] = field(default_factory=list)
    policies: dict[int, Policy] = field(default_factory=dict)
    device_hours: dict[int, float] = field(default_factory=dict)  # spent this calendar month
    usage: dict[int, float] = field(default_factory=dict)  # slot-seconds held recently (ties between teams)

    def policy(self, team_id: int) -> Policy:
        return self.policies.get(team_id, Policy())


def month_start(now: datetime) -> datetime:
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def next_month_start(now: datetime) -> datetime:
    start = month_start(now)
    return start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)


def quota_reason(standing: Standing, team_id: int) -> str | None:
    """Why the team may not take another slot of the queue now; None when it may."""
    policy, queue = standing.policy(team_id), standing.queue.upper()
    held = standing.held.get(team_id, 0)
    if policy.max_concurrent is not None and held >= policy.max_concurrent:
        plural = "" if policy.max_concurrent == 1 else "s"
        return (f"Waiting: the team's quota of {policy.max_concurrent} concurrent trial{plural} or job{plural} on the "
                f"{queue} queue is in use; it frees when one of them ends.")
    if policy.device_hours_per_month is not None:
        spent = standing.device_hours.get(team_id, 0.0)
        if spent >= policy.device_hours_per_month:
            frees = next_month_start(standing.now)
            return (f"Waiting: the team's {policy.device_hours_per_month:g} {queue} device-hours for "
                    f"{standing.now:%B %Y} are spent ({spent:.2f} used); new trials and jobs start on "
                    f"{frees.day} {frees:%B %Y}.")
    return None


def claim_order(standing: Standing) -> list[Waiting]:
    """The waiting studies and jobs whose team is under its quotas, in the order they get slots."""

    def key(study: Waiting):
        weight = max(standing.policy(study.team_id).weight, 1e-9)
        share = standing.held.get(study.team_id, 0) / weight
        used = standing.usage.get(study.team_id, 0.0) / weight
        return share, used, PRIORITY_RANK.get(study.priority, 1), study.since, study.kind, study.study_id

    eligible = [s for s in standing.waiting if quota_reason(standing, s.team_id) is None]
    return sorted(eligible, key=key)


def claim_order_for(standing: Standing, asking: Waiting) -> list[Waiting]:
    """claim_order as seen by the message of `asking` (a study's wake-up or a job's message): its
    own team's work keeps broker order between jobs and trials, so of that team only `asking` and,
    when `asking` is a study, the team's other studies stay in line (a team's jobs are not in its
    wake-ups' way, nor its trials in its jobs')."""
    return [w for w in claim_order(standing)
            if w.team_id != asking.team_id or w == asking or not (w.kind or asking.kind)]


def wait_reason(standing: Standing, study: Waiting, head: Waiting) -> str:
    """Why `study` waits while `head` gets the slot, in words for its page."""
    if head.team_id != study.team_id:
        return (f"Waiting: {standing.queue.upper()} slots go first to teams further below their share; "
                "it starts when one frees and its team is next.")
    if head.kind or study.kind:
        # claim_order_for: between a team's jobs and its trials, broker order decides.
        return ("Waiting: its team's work on this queue is next; the team's trials and jobs take its turns in "
                "the order workers pick them up.")
    if head.priority != study.priority:
        return "Waiting: the team's higher-priority work on this queue goes first."
    return "Waiting: the team's older work on this queue goes first."


@dataclass(frozen=True)
class Running:
    """A running trial that may be preempted (one execution: it resumes from the epoch it stops at)."""

    trial_pk: int
    team_id: int
    priority: str
    started: datetime


def preemption_victim(*, running: list[Running], held: dict[int, int], head: Waiting,
                      weights: dict[int, float], slots: int) -> int | None:
    """With every slot busy and `head` first in line: the trial to stop at its next epoch end, or None.
    Only a team over its share of the slots gives one up, and only to a team below its share or to a
    study of higher priority than the trial's; of those, the team furthest over its share, its
    lowest-priority study, its trial started last (the least work to redo, were it not resumed)."""
    teams = {*held, head.team_id}
    total = sum(weights.get(team, 1.0) for team in teams) or 1.0
    fair = {team: slots * weights.get(team, 1.0) / total for team in teams}
    rank = PRIORITY_RANK.get

    def per_weight(team: int, slots_held: int) -> float:
        return slots_held / weights.get(team, 1.0)

    def may_go(trial: Running) -> bool:
        team = trial.team_id
        if held.get(team, 0) <= fair[team] + 1e-9:
            return False  # a team at or below its share keeps its slots
        if team != head.team_id:
            # Only if the move leaves the waiting team no better off than the one giving up the slot:
            # else the next pass would move it back (one slot, two teams: nobody gains).
            gives_way = per_weight(head.team_id, held.get(head.team_id, 0) + 1) <= per_weight(team, held[team] - 1)
            if gives_way and held.get(head.team_id, 0) < fair[head.team_id] - 1e-9:
                return True
        return rank(head.priority, 1) < rank(trial.priority, 1)

    candidates = [trial for trial in running if may_go(trial)]
    if not candidates:
        return None
    victim = max(candidates, key=lambda t: (held[t.team_id] / weights.get(t.team_id, 1.0), rank(t.priority, 1),
                                            t.started))
    return victim.trial_pk
