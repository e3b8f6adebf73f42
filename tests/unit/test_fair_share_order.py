"""The fair-share order and quota reasons as pure functions (experiments/scheduling)."""

from datetime import UTC, datetime

from experiments.scheduling.fair_share import (
    Policy,
    Standing,
    Waiting,
    claim_order,
    next_month_start,
    quota_reason,
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
    assert "quota of 2 concurrent trials on the GPU queue" in quota_reason(standing, 1)
    assert claim_order(standing) == []
    standing.policies[1] = Policy(device_hours_per_month=10)
    standing.device_hours[1] = 10.5
    assert quota_reason(standing, 1) == ("Waiting: the team's 10 GPU device-hours for December 2026 are spent "
                                         "(10.50 used); new trials start on 1 January 2027.")
    standing.device_hours[1] = 9.9
    assert quota_reason(standing, 1) is None


def test_the_next_month_starts_on_its_first_day():
    assert next_month_start(datetime(2026, 11, 29, 23, 59)) == datetime(2026, 12, 1)
    assert next_month_start(datetime(2026, 12, 31, 12, 0)) == datetime(2027, 1, 1)
