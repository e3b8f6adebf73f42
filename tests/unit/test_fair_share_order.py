"""The fair-share order and quota reasons as pure functions (experiments/scheduling)."""

from datetime import UTC, datetime

from experiments.scheduling.fair_share import (
    Policy,
    Running,
    Standing,
    Waiting,
    claim_order,
    claim_order_for,
    next_month_start,
    preemption_victim,
    quota_reason,
    wait_reason,
)

NOW = datetime(2026, 12, 14, 9, 30, tzinfo=UTC)


def waiting(study_id, team_id, priority="normal", minutes_ago=0):
    return Waiting(study_id, team_id, priority, datetime(2026, 12, 14, 9, 0, tzinfo=UTC).replace(
        minute=59 - minutes_ago))


def test_the_team_furthest_below_its_share_then_priority_then_age():
    standing = Standing("gpu", NOW, held={1: 2, 2: 1}, waiting=[
        waiting(10, 1, "high", 50), waiting(20, 2, "low", 5), waiting(21, 2, "high", 1), waiting(22, 2, "high", 9)])
    assert [w.study_id for w in claim_order(standing)] == [22, 21, 20, 10]
    standing.policies[1] = Policy(weight=4)  # 2 held / 4 < 1 held / 1
    assert claim_order(standing)[0].study_id == 10


def test_quotas_hold_a_team_and_say_when_it_frees():
    standing = Standing("gpu", NOW, held={1: 2}, waiting=[waiting(10, 1)],
                        policies={1: Policy(max_concurrent=2)})
    assert "quota of 2 concurrent trials or jobs on the GPU queue" in quota_reason(standing, 1)
    assert claim_order(standing) == []
    standing.policies[1] = Policy(device_hours_per_month=10)
    standing.device_hours[1] = 10.5
    assert quota_reason(standing, 1) == ("Waiting: the team's 10 GPU device-hours for December 2026 are spent "
                                         "(10.50 used); new trials and jobs start on 1 January 2027.")
    standing.device_hours[1] = 9.9
    assert quota_reason(standing, 1) is None


def test_the_next_month_starts_on_its_first_day():
    assert next_month_start(datetime(2026, 11, 29, 23, 59)) == datetime(2026, 12, 1)
    assert next_month_start(datetime(2026, 12, 31, 12, 0)) == datetime(2027, 1, 1)


def running(pk, team, priority="normal", minute=0):
    return Running(pk, team, priority, datetime(2026, 12, 14, 9, minute, tzinfo=UTC))


def test_preemption_takes_from_the_team_furthest_over_its_share_its_lowest_priority_latest_trial():
    trials = [running(1, 1, "normal", 0), running(2, 1, "low", 1), running(3, 1, "low", 2), running(4, 2, "normal", 3)]
    held = {1: 3, 2: 1}
    head = waiting(30, 3)  # a third team, holding nothing: its fair share of 4 slots is 4/3
    assert preemption_victim(running=trials, held=held, head=head, weights={}, slots=4) == 3
    # A team at its share keeps its slots: team 2 (1 of 4/3) is never asked.
    assert preemption_victim(running=trials[3:], held={2: 1, 1: 3}, head=head, weights={}, slots=4) is None


def test_a_team_at_its_share_waits_unless_it_outranks_the_running_trial():
    trials = [running(1, 1, "low", 0), running(2, 2, "normal", 1)]
    held = {1: 1, 2: 1}  # two slots, two teams: both at their share
    assert preemption_victim(running=trials, held=held, head=waiting(30, 2, "normal"), weights={}, slots=2) is None
    # Three slots: team 1 holds two (over its 1.5), team 2 one. Team 1's own high-priority study waits:
    # team 1's low-priority trial gives way; a normal-priority study waiting would not outrank it.
    busy = [running(1, 1, "low", 0), running(5, 1, "normal", 1), running(6, 2, "low", 2)]
    held = {1: 2, 2: 1}
    assert preemption_victim(running=busy, held=held, head=waiting(31, 1, "high"), weights={}, slots=3) == 1
    assert preemption_victim(running=busy, held=held, head=waiting(31, 1, "low"), weights={}, slots=3) is None
    # A team alone on the queue is never over its share: its studies take turns as slots free.
    assert preemption_victim(running=busy[:2], held={1: 2}, head=waiting(31, 1, "high"), weights={}, slots=2) is None


def test_no_slot_moves_back_and_forth_between_two_teams():
    """One slot, two teams of the same priority: giving it to the waiting team would only make that
    team the one over its share on the next pass."""
    assert preemption_victim(running=[running(1, 1)], held={1: 1}, head=waiting(30, 2), weights={}, slots=1) is None
    three = [running(1, 1, minute=0), running(2, 1, minute=1), running(3, 2, minute=2)]
    assert preemption_victim(running=three, held={1: 2, 2: 1}, head=waiting(30, 2), weights={}, slots=3) is None


def test_a_message_sees_its_own_teams_jobs_and_trials_in_broker_order():
    """A study's wake-up is not held back by its team's jobs, nor a job's message by its team's trials
    or other jobs; another team's work, and the team's own studies to a study, keep their places."""
    job = Waiting(7, 1, "normal", NOW.replace(hour=8), kind="models")
    other_job = Waiting(8, 1, "normal", NOW.replace(hour=8, minute=5), kind="predictions")
    older_study, study = waiting(10, 1, minutes_ago=30), waiting(11, 1)
    theirs = Waiting(9, 2, "normal", NOW.replace(hour=7), kind="models")
    standing = Standing("gpu", NOW, held={1: 1}, waiting=[study, older_study, other_job, job, theirs])
    assert claim_order_for(standing, study) == [theirs, older_study, study]
    assert claim_order_for(standing, job) == [theirs, job]
    assert claim_order_for(standing, other_job) == [theirs, other_job]


def test_within_a_team_a_job_behind_a_trial_is_not_told_it_waits_for_older_work():
    """Between a team's jobs and its trials broker order decides (claim_order_for): the reason says so;
    between its studies, priority then age."""
    standing = Standing("cpu", NOW)
    study, older, job = waiting(10, 1, minutes_ago=9), waiting(11, 1, minutes_ago=20), Waiting(5, 1, "normal", NOW,
                                                                                              kind="models")
    assert "in the order workers pick them up" in wait_reason(standing, job, study)
    assert wait_reason(standing, study, older) == "Waiting: the team's older work on this queue goes first."
    assert "higher-priority" in wait_reason(standing, study, waiting(12, 1, "high"))
