"""Reads of the team's webhooks."""

from experiments.models import Team, Webhook


def team_webhooks(*, team: Team) -> list[Webhook]:
    return list(Webhook.objects.filter(team=team).order_by("name", "id"))
