"""Reads of the team's audit log."""

from experiments.models import AuditEvent, Team


def team_audit_events(*, team: Team, actor_id: int | None = None, verb: str = "", since=None, until=None):
    """The team's audit log, newest first, filtered by who, what and when (dates inclusive, UTC)."""
    rows = AuditEvent.objects.filter(team=team).select_related("actor", "content_type").order_by("-timestamp", "-id")
    if actor_id is not None:
        rows = rows.filter(actor_id=actor_id)
    if verb:
        rows = rows.filter(verb=verb)
    if since is not None:
        rows = rows.filter(timestamp__date__gte=since)
    if until is not None:
        rows = rows.filter(timestamp__date__lte=until)
    return rows


def team_audit_actors(*, team: Team) -> list[tuple[int, str]]:
    """Everyone who appears in the team's audit log (members past and present), by name."""
    rows = (AuditEvent.objects.filter(team=team, actor__isnull=False).order_by()
            .values_list("actor_id", "actor__username").distinct())
    return sorted(rows, key=lambda row: row[1].casefold())
