"""A team's webhooks, made and changed by owners and editors; each check raises WebhookError with a sentence for
whoever typed the value, shared by the form and the services."""

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import transaction

from experiments.errors import TuneboardError
from experiments.models import SUBSCRIBABLE_EVENTS, Team, Webhook
from experiments.security.egress import EgressBlocked, destination
from experiments.security.webhook_signing import MIN_SECRET_LENGTH, new_secret

MAX_URL = 500
MAX_SECRET = 128
_URL = URLValidator(schemes=["http", "https"])


class WebhookError(TuneboardError, ValueError):
    pass


def check_webhook_url(url: str) -> str:
    url = (url or "").strip()
    if not url:
        raise WebhookError("Enter the webhook's URL (http:// or https://).")
    if len(url) > MAX_URL:
        raise WebhookError(f"The URL is {len(url)} characters long; at most {MAX_URL} are allowed.")
    if not url.lower().startswith(("http://", "https://")):
        raise WebhookError(f"Webhooks are called over http:// or https:// only, not {url.split(':', 1)[0]!r}.")
    try:
        _URL(url)
    except ValidationError:
        raise WebhookError(f"{url!r} is not a valid http(s) URL.") from None
    try:
        destination(url)  # checked again at every send, against the address connected to
    except EgressBlocked as exc:
        raise WebhookError(str(exc)) from None
    return url


def check_webhook_events(events: list[str]) -> list[str]:
    known = [kind for kind, _ in SUBSCRIBABLE_EVENTS]
    unknown = sorted(set(events) - set(known))
    if unknown:
        raise WebhookError(f"Unknown event {unknown[0]!r}.")
    if not events:
        raise WebhookError("Choose at least one event to send.")
    return [kind for kind in known if kind in events]


def check_webhook_secret(secret: str) -> str:
    secret = (secret or "").strip()
    if secret and not MIN_SECRET_LENGTH <= len(secret) <= MAX_SECRET:
        raise WebhookError(f"A secret needs {MIN_SECRET_LENGTH} to {MAX_SECRET} characters; leave it empty to have "
                           "one generated.")
    return secret


def check_webhook_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise WebhookError("Give the webhook a name (e.g. the channel it posts to).")
    if len(name) > 100:
        raise WebhookError("The name is longer than 100 characters.")
    return name


@transaction.atomic
def webhook_create(*, team: Team, user, name: str, url: str, events: list[str], secret: str = "",
                   active: bool = True) -> tuple[Webhook, str]:
    """Returns the webhook and its secret (generated when none is given), to show once."""
    secret = check_webhook_secret(secret) or new_secret()
    webhook = Webhook.objects.create(team=team, name=check_webhook_name(name), url=check_webhook_url(url),
                                     events=check_webhook_events(events), secret=secret, active=active,
                                     created_by=user)
    return webhook, secret


@transaction.atomic
def webhook_update(*, webhook: Webhook, name: str, url: str, events: list[str], active: bool,
                   secret: str = "") -> Webhook:
    """An empty `secret` keeps the current one."""
    webhook.name, webhook.url = check_webhook_name(name), check_webhook_url(url)
    webhook.events, webhook.active = check_webhook_events(events), active
    webhook.secret = check_webhook_secret(secret) or webhook.secret
    webhook.save(update_fields=["name", "url", "events", "active", "secret"])
    return webhook


@transaction.atomic
def webhook_new_secret(*, webhook: Webhook) -> str:
    """A new generated secret; calls signed with the old one stop from now on."""
    webhook.secret = new_secret()
    webhook.save(update_fields=["secret"])
    return webhook.secret


@transaction.atomic
def webhook_delete(*, webhook: Webhook) -> None:
    webhook.delete()  # its deliveries go with it
