"""The audit log: who changed whom's access, tokens and webhooks, cancelled what or downloaded which model,
recorded in the same transaction as the change (docs/design/job-lifecycle.md)."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from urllib.parse import urlsplit

from auditlog.registry import auditlog
from django.conf import settings
from django.db.models.signals import pre_save
from django.utils import timezone

from experiments.models import ApiToken, AuditEvent, Invitation, Membership, Webhook
from experiments.security.login_limits import client_ip

_request: ContextVar = ContextVar("audit_request", default=None)

# Verbs of the registered models' saves and deletes: (model, action) -> verb.
_SIGNAL_VERBS = {
    ("membership", AuditEvent.Action.CREATE): "membership.add",
    ("membership", AuditEvent.Action.UPDATE): "membership.role",
    ("membership", AuditEvent.Action.DELETE): "membership.remove",
    ("invitation", AuditEvent.Action.CREATE): "invitation.create",
    ("invitation", AuditEvent.Action.DELETE): "invitation.withdraw",
    ("apitoken", AuditEvent.Action.CREATE): "token.create",
    ("apitoken", AuditEvent.Action.UPDATE): "token.update",
    ("apitoken", AuditEvent.Action.DELETE): "token.delete",
    ("webhook", AuditEvent.Action.CREATE): "webhook.create",
    ("webhook", AuditEvent.Action.UPDATE): "webhook.update",
    ("webhook", AuditEvent.Action.DELETE): "webhook.delete",
}
VERB_LABELS = {
    "membership.add": "Member joined", "membership.role": "Role changed", "membership.remove": "Member left or removed",
    "invitation.create": "Invitation made", "invitation.accept": "Invitation accepted",
    "invitation.decline": "Invitation declined", "invitation.update": "Invitation changed",
    "invitation.withdraw": "Invitation withdrawn or replaced",
    "token.create": "API token made", "token.update": "API token changed", "token.delete": "API token revoked",
    "webhook.create": "Webhook made", "webhook.update": "Webhook changed", "webhook.delete": "Webhook removed",
    "study.cancel": "Study cancelled", "model.cancel": "Model cancelled", "model.download": "Model downloaded",
    "registry.register": "Model registered", "registry.alias_set": "Alias moved",
    "registry.alias_remove": "Alias removed", "registry.rollback": "Alias move rolled back",
    "recipe.create": "Ensemble recipe made", "recipe.update": "Ensemble recipe changed",
    "recipe.clone": "Ensemble recipe cloned", "recipe.delete": "Ensemble recipe deleted",
    "recipe.take_over": "Ensemble recipe taken over",
    "queue_policy.set": "Queue share or quota set by a site admin",
    "sso.login": "Signed in with single sign-on",
}


def mask_secret(value: str) -> str:
    """A webhook's secret never reaches the log; of its URL only the scheme and host do (the path
    of a Slack URL is itself a credential)."""
    if value.startswith(("http://", "https://")):
        parts = urlsplit(value)
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}/…"
    return "(hidden)"


def register_audited_models() -> None:
    """Called once when the app loads (experiments.apps)."""
    auditlog.register(Membership, include_fields=["user", "team", "role"])
    auditlog.register(Invitation, include_fields=["email", "username", "role", "expires", "accepted_at", "accepted_by",
                                                  "declined_at"])
    auditlog.register(ApiToken, include_fields=["name", "team", "role", "expiry"])
    auditlog.register(Webhook, include_fields=["name", "url", "events", "active", "secret"],
                      mask_fields=["url", "secret"], mask_callable="experiments.services.audit.mask_secret")
    pre_save.connect(_complete, sender=AuditEvent, dispatch_uid="tuneboard-audit-complete")


def _verb(event: AuditEvent) -> str:
    model = event.content_type.model
    if model == "invitation" and event.action == AuditEvent.Action.UPDATE:
        changes = event.changes if isinstance(event.changes, dict) else {}
        return ("invitation.accept" if "accepted_at" in changes else
                "invitation.decline" if "declined_at" in changes else "invitation.update")
    return _SIGNAL_VERBS.get((model, event.action), f"{model}.{event.get_action_display()}")


def _complete(sender, instance: AuditEvent, **kwargs) -> None:
    """Fill in what the signal-made row lacks: the team, the verb, and who did it from where."""
    if instance.team_id is None:
        instance.team_id = (instance.additional_data or {}).get("team")
    if not instance.verb:
        instance.verb = _verb(instance)
    request = _request.get()
    if request is None:
        return
    user = getattr(request, "user", None)  # read now: DRF authenticates tokens after the middleware ran
    if instance.actor_id is None and user is not None and user.is_authenticated:
        instance.actor, instance.actor_email = user, user.email or None
    if instance.remote_addr is None:
        instance.remote_addr = client_ip(request)


@contextmanager
def audit_acting_request(request) -> Iterator[None]:
    """While it is handled, the request is the audit log's source of actor and address."""
    token = _request.set(request)
    try:
        yield
    finally:
        _request.reset(token)


def audit_record(*, verb: str, obj, team_id: int, changes: dict | None = None, actor=None) -> AuditEvent:
    """Record an action that is not a save of a registered model (a cancel, a download), inside the transaction of the
    change it records."""
    action = AuditEvent.Action.ACCESS if verb.endswith(".download") else AuditEvent.Action.UPDATE
    who = {"actor": actor, "actor_email": actor.email or None} if getattr(actor, "is_authenticated", False) else {}
    return AuditEvent.objects.log_create(obj, force_log=True, action=action, changes=changes or {}, verb=verb,
                                         team_id=team_id, **who)


def audit_purge(*, now=None) -> int:
    """Forget audit rows older than TUNEBOARD_AUDIT_DAYS (beat runs it hourly)."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.AUDIT_DAYS)
    deleted, _ = AuditEvent.objects.filter(timestamp__lt=cutoff).delete()
    return deleted
