"""Personal API tokens: made for one team, with a name, a role ceiling and an optional expiry;
shown once, stored hashed (django-rest-knox)."""

from datetime import timedelta

from django.db import transaction

from experiments.errors import TuneboardError
from experiments.models import ROLE_RANK, ApiToken, Membership

MAX_DAYS = 3650


class ApiTokenError(TuneboardError):
    pass


@transaction.atomic
def api_token_create(*, user, name: str, team_id: int | None, role: str, days: int | None = None
                     ) -> tuple[ApiToken, str]:
    """The token row and the token itself (the only time it exists in clear). It acts in
    `team_id`, which must be one of the user's teams, with at most `role`, which cannot be above
    the user's own role there."""
    name = name.strip()
    if not name:
        raise ApiTokenError("Give the token a name, e.g. the machine or script that will use it.")
    if len(name) > 100:
        raise ApiTokenError("The name can have at most 100 characters.")
    if days is not None and not 1 <= days <= MAX_DAYS:
        raise ApiTokenError(f"Expiry must be from 1 to {MAX_DAYS:,} days, or empty for a token that never expires.")
    membership = Membership.objects.filter(user=user, team_id=team_id).select_related("team").first()
    if membership is None:
        raise ApiTokenError("Choose one of your teams: a token acts in one team only.")
    if role not in ROLE_RANK:
        raise ApiTokenError(f"Unknown role {role!r}: choose viewer, editor or owner.")
    if ROLE_RANK[role] > ROLE_RANK[membership.role]:
        raise ApiTokenError(f"You are {membership.role} in {membership.team.name}, so a token of yours there can be "
                            f"{membership.role} at most.")
    return ApiToken.objects.create(user=user, name=name, team=membership.team, role=role,
                                   expiry=timedelta(days=days) if days else None)


@transaction.atomic
def api_token_revoke(*, user, token_key: str) -> None:
    token = ApiToken.objects.filter(user=user, token_key=token_key).first()
    if token is None:
        raise ApiTokenError("No such token of yours; it may have been revoked already.")
    token.delete()  # one row, through the model, so the audit log records it
