"""Who acts and in which team: a token (or the session) is the user; the team is the one named
by X-Tuneboard-Team, else the session's current team (browser), else the first by name."""

from rest_framework import exceptions, permissions

from experiments.middleware import SESSION_KEY
from experiments.models import Membership

TEAM_HEADER = "HTTP_X_TUNEBOARD_TEAM"


def resolve_membership(request) -> Membership:
    memberships = Membership.objects.filter(user=request.user).select_related("team")
    raw = request.META.get(TEAM_HEADER)
    if raw is not None:
        raw = raw.strip()
        chosen = memberships.filter(team_id=int(raw)).first() if raw.isascii() and raw.isdigit() and len(
            raw) < 18 else None
        if chosen is None:
            # Same answer whether the team exists or not: other teams stay invisible.
            raise exceptions.PermissionDenied(f"You are not a member of team {raw!r} (X-Tuneboard-Team).")
        return chosen
    chosen = None
    session = getattr(request, "session", None)
    if request.auth is None and session is not None and session.get(SESSION_KEY) is not None:
        chosen = memberships.filter(team_id=session.get(SESSION_KEY)).first()
    chosen = chosen or memberships.order_by("team__name").first()
    if chosen is None:
        raise exceptions.PermissionDenied("You are not a member of any team yet; ask a team owner to add you.")
    return chosen


class TeamMember(permissions.BasePermission):
    """Authenticated, a member of the chosen team (request.team, request.membership), and an
    owner or editor to change anything."""

    message = "Viewers cannot change anything in this team; ask an owner for the editor role."

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            raise exceptions.NotAuthenticated("Send a personal API token as 'Authorization: Bearer <token>' "
                                              "(make one at /account/tokens/), or log in.")
        membership = resolve_membership(request)
        request.membership = membership
        request.team = membership.team
        # The underlying Django request too, so shared helpers (views/access.py) see the team.
        request._request.team, request._request.membership = membership.team, membership
        if request.method in permissions.SAFE_METHODS:
            return True
        return membership.can_edit
