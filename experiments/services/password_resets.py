"""Password-reset mails throttled per address and per client, counted in the database so every web process shares
the count without the cache the embedded mode lacks."""

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from experiments.models import PasswordResetRequest

WINDOW = timedelta(hours=1)


def _digest(email: str) -> str:
    # The address typed, hashed: a table of what strangers typed is no place for addresses.
    return hashlib.sha256(email.strip().casefold().encode()).hexdigest()


@transaction.atomic
def password_reset_allowed(*, email: str, client: str | None, now=None) -> bool:
    """Record one request and say whether it may send mail. The caller answers the same either way."""
    now = now or timezone.now()
    PasswordResetRequest.objects.filter(created__lt=now - WINDOW).delete()
    digest = _digest(email)
    recent = PasswordResetRequest.objects.filter(created__gte=now - WINDOW)
    allowed = (recent.filter(email_digest=digest).count() < settings.PASSWORD_RESETS_PER_ADDRESS
               and (client is None or recent.filter(client=client).count() < settings.PASSWORD_RESETS_PER_CLIENT))
    PasswordResetRequest.objects.create(email_digest=digest, client=client, created=now, allowed=allowed)
    return allowed
