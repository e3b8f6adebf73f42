"""Sending a notification delivery on a worker: claimed once, sent outside any transaction, retried with backoff
while the database says it is due."""

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from experiments.models import NotificationDelivery
from experiments.security import egress
from experiments.security.webhook_signing import body_bytes, signed_headers
from experiments.services.resends import resend_due
from experiments.states import DeliveryStatus

log = logging.getLogger(__name__)
DELIVER_TASK = "workers.tasks.deliver_notification"
QUEUE = "cpu"
# A claimed delivery whose worker dies mid-send is due again this long after the claim.
LEASE_SECONDS = 60
# A task may arrive a little before its countdown by another host's clock.
EARLY_TOLERANCE_SECONDS = 1.0
HISTORY_KEPT = 20
MAX_ERROR = 500
BLOCKED = "Blocked: not a public address"


def retry_delay(attempts: int, *, base: float | None = None) -> float:
    """Seconds to wait after the `attempts`-th failed try: base, 2 x base, 4 x base ..."""
    base = settings.NOTIFY_RETRY_SECONDS if base is None else base
    return base * 2 ** max(0, attempts - 1)


def deliveries_enqueue(*, delivery_pks: list[int], countdown: float | None = None) -> None:
    """Hand the deliveries' tasks to the broker once the current transaction commits."""
    if not delivery_pks:
        return

    def send() -> None:
        try:
            for pk in delivery_pks:
                current_app.send_task(DELIVER_TASK, args=[pk], queue=QUEUE, countdown=countdown)
        except Exception:
            log.warning("could not send delivery tasks %s; the reaper re-sends them", delivery_pks, exc_info=True)

    transaction.on_commit(send)


@dataclass
class Result:
    ok: bool
    code: int | None = None
    error: str = ""
    final: bool = False  # no point trying again


def _send_email(delivery: NotificationDelivery) -> Result:
    event = delivery.event
    kind = event.get_kind_display()
    send_mail(
        subject=f"[Tuneboard] {event.team.name}: {kind}",
        message=(f"{event.text}\n\n{event.payload.get('url', '')}\n\n"
                 f"You get this because you chose “{kind}” for the team {event.team.name} on Tuneboard. "
                 f"Change it under {settings.SITE_URL}/account/notifications/\n"),
        from_email=None, recipient_list=[delivery.target], fail_silently=False,
    )
    return Result(True)


def _post_webhook(delivery: NotificationDelivery) -> Result:
    """Call the receiver at an address the egress policy allows (checked again now, against the
    address connected to). Only the status code or a fixed error class is kept: a receiver's body,
    reason phrase or banner never reaches a page, the API or the log."""
    webhook = delivery.webhook
    if not webhook.active:
        return Result(False, error="Not sent: the webhook was turned off.", final=True)
    body = body_bytes(delivery.event.payload)
    headers = signed_headers(secret=webhook.secret, body=body, event=delivery.event.kind, delivery_id=delivery.pk)
    try:
        status = egress.post(webhook.url, body=body, headers=headers, timeout=settings.WEBHOOK_TIMEOUT_SECONDS)
    except egress.EgressBlocked:
        return Result(False, error=BLOCKED, final=True)
    except egress.SendFailed as exc:
        return Result(False, error=str(exc))
    ok = 200 <= status < 300
    return Result(ok, status, "" if ok else f"HTTP {status}")


def _send(delivery: NotificationDelivery) -> Result:
    try:
        if delivery.channel == NotificationDelivery.Channel.EMAIL:
            return _send_email(delivery)
        return _post_webhook(delivery)
    except Exception as exc:  # the mail server's refusal, DNS, TLS, or a bug: one fixed class on the row
        log.warning("delivery %s (%s) raised %s", delivery.pk, delivery.channel, type(exc).__name__)
        return Result(False, error="Could not send")


def _claim(delivery_pk: int, now) -> NotificationDelivery | None:
    claimed = NotificationDelivery.objects.filter(
        pk=delivery_pk, status=DeliveryStatus.PENDING,
        next_attempt__lte=now + timedelta(seconds=EARLY_TOLERANCE_SECONDS),
    ).update(attempts=F("attempts") + 1, next_attempt=now + timedelta(seconds=LEASE_SECONDS), resends=0)
    if not claimed:
        return None
    return NotificationDelivery.objects.select_related("event__team", "webhook").get(pk=delivery_pk)


def delivery_attempt(*, delivery_pk: int) -> str:
    """One try of one delivery, if it is due: "sent", "retry", "failed", or "skipped" (not due,
    already sent, or another task has it)."""
    delivery = _claim(delivery_pk, timezone.now())
    if delivery is None:
        return "skipped"
    started = time.monotonic()
    result = _send(delivery)
    now = timezone.now()
    entry = {"at": now.isoformat(), "ok": result.ok, "code": result.code, "error": result.error[:MAX_ERROR],
             "seconds": round(time.monotonic() - started, 3)}
    fields = {"response_code": result.code, "history": [*delivery.history, entry][-HISTORY_KEPT:]}
    if result.ok:
        fields.update(status=DeliveryStatus.SENT, sent_at=now, next_attempt=None, last_error="")
        outcome = "sent"
    elif result.final or delivery.attempts >= settings.NOTIFY_MAX_ATTEMPTS:
        fields.update(status=DeliveryStatus.FAILED, next_attempt=None, last_error=result.error[:MAX_ERROR])
        outcome = "failed"
    else:
        delay = retry_delay(delivery.attempts)
        fields.update(next_attempt=now + timedelta(seconds=delay), last_sent=now, last_error=result.error[:MAX_ERROR])
        outcome = "retry"
    with transaction.atomic():
        # Only the claim that sent it records (fenced by attempts); the sweep never steals a live lease.
        mine = NotificationDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.PENDING,
                                                   attempts=delivery.attempts).update(**fields)
        if mine and outcome == "retry":
            deliveries_enqueue(delivery_pks=[delivery.pk], countdown=delay)
    if not result.ok:
        log.info("delivery %s (%s) attempt %s failed: %s", delivery.pk, delivery.channel, delivery.attempts,
                 result.error)
    return outcome


def deliveries_resend_due(*, now=None) -> int:
    """The reaper's sweep: pending deliveries overdue by more than RESEND_AFTER_SECONDS (their
    task was lost with a broker restart, or their worker died mid-send) get a task again;
    repeated resends of one delivery back off as wake-ups do."""
    now = now or timezone.now()
    overdue = NotificationDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt__lt=now - timedelta(seconds=settings.RESEND_AFTER_SECONDS))
    sent = 0
    for pk, last_sent, resends in overdue.values_list("pk", "last_sent", "resends")[:500]:
        if not resend_due(last_sent, resends, now):
            continue
        with transaction.atomic():
            if NotificationDelivery.objects.filter(pk=pk, status=DeliveryStatus.PENDING, last_sent=last_sent).update(
                    last_sent=now, resends=F("resends") + 1):
                deliveries_enqueue(delivery_pks=[pk])
                sent += 1
    return sent
