"""Reads of notifications: a team's deliveries, and what each of a user's teams sends them."""

from experiments.models import Membership, NotificationDelivery, NotificationPreference, Team


def team_deliveries(*, team: Team, limit: int | None = 25):
    """The latest notification deliveries of the team (e-mails and webhook calls), newest first."""
    rows = (NotificationDelivery.objects.filter(event__team=team).select_related("event", "webhook", "user")
            .defer("event__payload").order_by("-created", "-id"))
    return rows if limit is None else rows[:limit]


def notification_preferences(*, user) -> list[dict]:
    """One row per team of the user: the team and what it sends them by e-mail."""
    memberships = Membership.objects.filter(user=user).select_related("team").order_by("team__name")
    saved = {p.team_id: p for p in NotificationPreference.objects.filter(user=user)}
    return [{"team": m.team, "events": saved[m.team_id].events if m.team_id in saved else [],
             "only_mine": saved[m.team_id].only_mine if m.team_id in saved else False} for m in memberships]
