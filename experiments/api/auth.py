"""Who acts and in which team: a token acts in its one team with the lower of its role and its user's, read on every
request so a demotion takes effect at once (docs/design/web-and-security.md)."""

import copy

from rest_framework import exceptions, permissions

from experiments.middleware import SESSION_KEY
from experiments.models import ApiToken, Membership, lower_role
from experiments.selectors.teams import membership_current
from experiments.tuning.bounds import parse_id

TEAM_HEADER = "HTTP_X_TUNEBOARD_TEAM"


def _named_team(request) -> int | None:
    """The team id of X-Tuneboard-Team, None when absent; a header naming no team of the user's
    gets the same answer whether that team exists or not."""
    raw = request.META.get(TEAM_HEADER)
    if raw is None:
        return None
    team_id = parse_id(raw)
    if team_id is None or not Membership.objects.filter(user=request.user, team_id=team_id).exists():
        raise exceptions.PermissionDenied(f"You are not a member of team {raw.strip()[:30]!r} (X-Tuneboard-Team).")
    return team_id


def _token_membership(request, token: ApiToken) -> Membership:
    named = _named_team(request)
    if named is not None and named != token.team_id:
        raise exceptions.PermissionDenied(f"This token acts for team {token.team_id} only; make a token for team "
                                          f"{named} at /account/tokens/ (X-Tuneboard-Team).")
    membership = Membership.objects.filter(user=request.user, team_id=token.team_id).select_related("team").first()
    if membership is None:
        raise exceptions.PermissionDenied("This token's user is no longer a member of its team; it acts for no one.")
    # A copy that is never saved: the token's ceiling applies to this request only.
    acting = copy.copy(membership)
    acting.role = lower_role(membership.role, token.role)
    return acting


def resolve_membership(request) -> Membership:
    if isinstance(request.auth, ApiToken):
        return _token_membership(request, request.auth)
    named = _named_team(request)
    session = getattr(request, "session", None)
    wanted = named if named is not None else (session.get(SESSION_KEY) if session is not None else None)
    chosen = membership_current(user=request.user, team_id=wanted)
    if chosen is None:
        raise exceptions.PermissionDenied("You are not a member of any team yet: accept an invitation on your "
                                          "dashboard, or ask a team owner to invite you.")
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


class OwnerOnly(TeamMember):
    """What only a team's owners see (the audit log)."""

    message = "Only the team's owners can see this."

    def has_permission(self, request, view) -> bool:
        return super().has_permission(request, view) and request.membership.is_owner
