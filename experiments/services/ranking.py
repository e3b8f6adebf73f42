"""The team's ranking choice: which recorded test metric the leaderboard and the dashboard rank by."""

import re

from experiments.errors import TuneboardError
from experiments.models import Team

METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,49}$")


class RankingError(TuneboardError):
    """Why a ranking metric cannot be chosen; str(exc) is shown to the user."""


def team_set_ranking_metric(*, team: Team, metric: str, recorded: list[str]) -> Team:
    """`metric` one of the test metrics the team's models record, or "" for the task's default."""
    metric = metric.strip()
    if metric:
        if not METRIC_NAME.match(metric) or metric not in recorded:
            known = ", ".join(recorded) or "none yet"
            raise RankingError(f"Rank by a test metric your models record ({known}), not {metric!r}.")
        if metric.startswith("val_"):
            raise RankingError("Rank by a test metric; validation figures come from different models.")
    team.ranking_metric = metric
    team.save(update_fields=["ranking_metric"])
    return team
