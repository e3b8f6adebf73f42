"""Personal API tokens: made with a name and an optional expiry, shown once, stored hashed."""

from datetime import timedelta

from experiments.errors import TuneboardError
from experiments.models import ApiToken

MAX_DAYS = 3650


class ApiTokenError(TuneboardError):
    pass


def api_token_create(*, user, name: str, days: int | None = None) -> tuple[ApiToken, str]:
    """The token row and the token itself (the only time it exists in clear)."""
    name = name.strip()
    if not name:
        raise ApiTokenError("Give the token a name, e.g. the machine or script that will use it.")
    if len(name) > 100:
        raise ApiTokenError("The name can have at most 100 characters.")
    if days is not None and not 1 <= days <= MAX_DAYS:
        raise ApiTokenError(f"Expiry must be from 1 to {MAX_DAYS:,} days, or empty for a token that never expires.")
    return ApiToken.objects.create(user=user, name=name, expiry=timedelta(days=days) if days else None)


def api_token_revoke(*, user, token_key: str) -> int:
    deleted, _ = ApiToken.objects.filter(user=user, token_key=token_key).delete()
    if not deleted:
        raise ApiTokenError("No such token of yours; it may have been revoked already.")
    return deleted
