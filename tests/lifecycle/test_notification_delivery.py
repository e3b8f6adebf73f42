"""One delivery attempt, in this process, against a real HTTP server on 127.0.0.1 (and Django's
in-memory mail backend): a signed POST that verifies, retries with doubling waits when the
receiver fails or is down, a final failure after the last attempt, one send per claim."""

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from experiments.models import EventKind, NotificationDelivery, NotificationPreference
from experiments.security.webhook_signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify,
)
from experiments.services.notification_delivery import delivery_attempt
from experiments.services.notifications import Message, notify, notify_webhook_test
from experiments.services.webhooks import webhook_create
from tests.fixtures.webhook_receiver import Receiver, closed_port_url

pytestmark = pytest.mark.django_db
SECRET = "a-secret-of-the-team-1234"


@pytest.fixture(autouse=True)
def quick_retries(settings, loopback_receivers):
    settings.NOTIFY_RETRY_SECONDS = 1
    settings.NOTIFY_MAX_ATTEMPTS = 3
    settings.WEBHOOK_TIMEOUT_SECONDS = 2


def a_test_delivery(acme, alice, url) -> NotificationDelivery:
    webhook, _ = webhook_create(team=acme, user=alice, name="alerts", url=url, secret=SECRET,
                                events=[EventKind.STUDY_COMPLETED])
    notify_webhook_test(webhook=webhook, user=alice)
    return NotificationDelivery.objects.get(webhook=webhook)


def make_due(delivery):
    NotificationDelivery.objects.filter(pk=delivery.pk).update(next_attempt=timezone.now())


def test_a_webhook_gets_a_signed_slack_compatible_post_and_the_delivery_is_sent(acme, alice):
    with Receiver() as receiver:
        delivery = a_test_delivery(acme, alice, receiver.url)
        assert delivery_attempt(delivery_pk=delivery.pk) == "sent"
    (call,) = receiver.calls
    assert call.path == "/hooks/tuneboard"
    assert verify(secret=SECRET, body=call.body, timestamp=call.headers[TIMESTAMP_HEADER],
                  signature_header=call.headers[SIGNATURE_HEADER])
    assert call.headers[EVENT_HEADER] == "test" and call.headers[DELIVERY_HEADER] == str(delivery.pk)
    payload = json.loads(call.body)
    assert payload["text"].startswith("[Acme] Test from Tuneboard, sent by alice")
    assert payload["event"] == "test" and payload["team"]["name"] == "Acme" and payload["webhook"]["name"] == "alerts"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code, delivery.last_error) == ("sent", 1, 200, "")
    assert delivery.next_attempt is None and delivery.sent_at is not None
    assert [entry["ok"] for entry in delivery.history] == [True]


def test_a_failing_receiver_is_retried_with_doubling_waits_until_it_answers(acme, alice, settings):
    settings.NOTIFY_RETRY_SECONDS = 5
    with Receiver(statuses=[500, 503]) as receiver:
        delivery = a_test_delivery(acme, alice, receiver.url)
        assert delivery_attempt(delivery_pk=delivery.pk) == "retry"
        delivery.refresh_from_db()
        first_wait = (delivery.next_attempt - timezone.now()).total_seconds()
        assert 4 < first_wait <= 5 and delivery.status == "pending"
        assert delivery.response_code == 500
        assert delivery.last_error == "HTTP 500"  # never the reason phrase or the body
        assert delivery_attempt(delivery_pk=delivery.pk) == "skipped"  # not due yet
        make_due(delivery)
        assert delivery_attempt(delivery_pk=delivery.pk) == "retry"
        delivery.refresh_from_db()
        assert 9 < (delivery.next_attempt - timezone.now()).total_seconds() <= 10  # twice the first wait
        make_due(delivery)
        assert delivery_attempt(delivery_pk=delivery.pk) == "sent"
    assert len(receiver.calls) == 3
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("sent", 3, 200)
    assert [(e["ok"], e["code"]) for e in delivery.history] == [(False, 500), (False, 503), (True, 200)]
    assert delivery_attempt(delivery_pk=delivery.pk) == "skipped"  # sent is sent


def test_a_receiver_that_is_down_fails_after_the_last_attempt_with_the_reason(acme, alice):
    delivery = a_test_delivery(acme, alice, closed_port_url())
    outcomes = []
    for _ in range(3):
        make_due(delivery)
        outcomes.append(delivery_attempt(delivery_pk=delivery.pk))
    assert outcomes == ["retry", "retry", "failed"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt) == ("failed", 3, None)
    assert delivery.last_error == "Could not connect"  # a fixed class: not refused / reset / DNS
    make_due(delivery)
    assert delivery_attempt(delivery_pk=delivery.pk) == "skipped"


def test_a_redirect_is_an_answer_not_a_detour(acme, alice):
    with Receiver(statuses=[302]) as receiver:
        delivery = a_test_delivery(acme, alice, receiver.url)
        assert delivery_attempt(delivery_pk=delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert delivery.response_code == 302 and delivery.last_error == "HTTP 302"
    assert len(receiver.calls) == 1


def test_a_webhook_turned_off_meanwhile_is_not_called(acme, alice):
    with Receiver() as receiver:
        delivery = a_test_delivery(acme, alice, receiver.url)
        delivery.webhook.active = False
        delivery.webhook.save(update_fields=["active"])
        assert delivery_attempt(delivery_pk=delivery.pk) == "failed"
    assert receiver.calls == []
    delivery.refresh_from_db()
    assert delivery.last_error == "Not sent: the webhook was turned off."


def test_an_opted_in_member_gets_the_mail(acme, alice, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    NotificationPreference.objects.create(user=alice, team=acme, events=[EventKind.STUDY_COMPLETED])
    notify(team_id=acme.id, kind=EventKind.STUDY_COMPLETED, describe=lambda: Message(
        "Study “x” finished: 3 trials completed.", "/studies/1/", {"study": {"id": 1}}))
    delivery = NotificationDelivery.objects.get()
    assert delivery_attempt(delivery_pk=delivery.pk) == "sent"
    (message,) = mail.outbox
    assert message.to == ["alice@example.com"] and message.subject == "[Tuneboard] Acme: Study finished"
    assert "Study “x” finished: 3 trials completed." in message.body
    assert "http://127.0.0.1:8000/studies/1/" in message.body and "/account/notifications/" in message.body


def test_a_mail_server_that_is_down_is_retried_with_its_error(acme, alice, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", int(closed_port_url().split(":")[2].split("/")[0])
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    NotificationPreference.objects.create(user=alice, team=acme, events=[EventKind.MODEL_READY])
    notify(team_id=acme.id, kind=EventKind.MODEL_READY, describe=lambda: Message("Model m v1 is ready.", "/models/1/",
                                                                                 {}))
    delivery = NotificationDelivery.objects.get()
    assert delivery_attempt(delivery_pk=delivery.pk) == "retry"
    delivery.refresh_from_db()
    assert delivery.last_error == "Could not send"


def test_a_claim_lost_with_its_worker_is_due_again_after_the_lease(acme, alice):
    with Receiver() as receiver:
        delivery = a_test_delivery(acme, alice, receiver.url)
        # A worker claimed it and died before recording anything.
        NotificationDelivery.objects.filter(pk=delivery.pk).update(
            attempts=1, next_attempt=timezone.now() + timedelta(seconds=60))
        assert delivery_attempt(delivery_pk=delivery.pk) == "skipped"  # the lease still runs
        make_due(delivery)
        assert delivery_attempt(delivery_pk=delivery.pk) == "sent"
    delivery.refresh_from_db()
    assert delivery.attempts == 2 and len(receiver.calls) == 1
