"""What a team's trials cost in device time: each ended trial's wall time times the devices it held,
summed by calendar month (of the trial's end) and device kind, newest month first."""

from django.db.models import Sum
from django.db.models.functions import TruncMonth

from experiments.models import Team, Trial


def team_device_seconds_by_month(*, team: Team, months: int = 12) -> list[dict]:
    rows = (Trial.objects.filter(study__team=team, device_seconds__isnull=False, finished__isnull=False)
            .annotate(month=TruncMonth("finished")).order_by().values("month", "device_kind")
            .annotate(seconds=Sum("device_seconds")).order_by("-month", "device_kind"))
    by_month: dict = {}
    for row in rows:
        by_month.setdefault(row["month"], {})[row["device_kind"]] = row["seconds"]
    return [{"month": month, "by_kind": kinds, "total": sum(kinds.values())}
            for month, kinds in list(by_month.items())[:months]]


def device_seconds_by_team() -> dict[tuple[int, str], float]:
    """Every team's ended trials' device time by (team id, device kind): /metrics's counter."""
    rows = (Trial.objects.filter(device_seconds__isnull=False).order_by().values("study__team_id", "device_kind")
            .annotate(seconds=Sum("device_seconds")))
    return {(row["study__team_id"], row["device_kind"]): row["seconds"] for row in rows}
