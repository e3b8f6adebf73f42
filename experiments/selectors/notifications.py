"""Reads of the team's notification deliveries."""

from experiments.models import NotificationDelivery, Team


def team_deliveries(*, team: Team, limit: int | None = 25):
    """The latest notification deliveries of the team (e-mails and webhook calls), newest first."""
    rows = (NotificationDelivery.objects.filter(event__team=team).select_related("event", "webhook", "user")
            .defer("event__payload").order_by("-created", "-id"))
    return rows if limit is None else rows[:limit]
