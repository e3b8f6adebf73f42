"""The order in which studies waiting on one queue get its free slots: the team furthest below its
share first (slots held / weight), then the study's priority, then its age; a team at a quota waits."""

from dataclasses import dataclass, field
from datetime import datetime

PRIORITY_RANK = {"high": 0, "normal": 1, "low": 2}


@dataclass(frozen=True)
class Waiting:
    """A running study on the queue with a free slot it asked for (a wake-up in flight)."""

    study_id: int
    team_id: int
    priority: str
    since: datetime


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
        return (f"Waiting: the team's quota of {policy.max_concurrent} concurrent trial{plural} on the {queue} "
                "queue is in use; it frees when one of them ends.")
    if policy.device_hours_per_month is not None:
        spent = standing.device_hours.get(team_id, 0.0)
        if spent >= policy.device_hours_per_month:
            frees = next_month_start(standing.now)
            return (f"Waiting: the team's {policy.device_hours_per_month:g} {queue} device-hours for "
                    f"{standing.now:%B %Y} are spent ({spent:.2f} used); new trials start on "
                    f"{frees.day} {frees:%B %Y}.")
    return None


def claim_order(standing: Standing) -> list[Waiting]:
    """The waiting studies whose team is under its quotas, in the order they get slots."""

    def key(study: Waiting):
        share = standing.held.get(study.team_id, 0) / max(standing.policy(study.team_id).weight, 1e-9)
        return share, PRIORITY_RANK.get(study.priority, 1), study.since, study.study_id

    eligible = [s for s in standing.waiting if quota_reason(standing, s.team_id) is None]
    return sorted(eligible, key=key)


def wait_reason(standing: Standing, study: Waiting, head: Waiting) -> str:
    """Why `study` waits while `head` gets the slot, in words for its page."""
    if head.team_id != study.team_id:
        return (f"Waiting: {standing.queue.upper()} slots go first to teams further below their share; "
                "it starts when one frees and its team is next.")
    if head.priority != study.priority:
        return "Waiting: the team's higher-priority studies on this queue go first."
    return "Waiting: the team's older studies on this queue go first."
