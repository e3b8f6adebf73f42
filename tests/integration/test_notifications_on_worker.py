"""Notifications end to end on real worker processes: a study finishing on a worker reaches a
real HTTP receiver (signed; the HMAC is checked here) and the mailbox of a user who opted in;
a receiver that is down is tried again with growing waits and the failure shows on the team
page; a delivery whose task the broker lost is sent by the reaper's sweep; and the embedded
worker of `make run` (SQLite, filesystem transport) consumes the delivery tasks too."""

import json
import os
import signal
import subprocess
import sys
from datetime import datetime
from email import message_from_string

import pytest
import redis
from django.conf import settings as django_settings
from django.urls import reverse

from experiments.models import EventKind, NotificationDelivery, NotificationPreference, Study
from experiments.security.webhook_signing import DELIVERY_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify
from experiments.services.notifications import notify_webhook_test
from experiments.services.webhooks import webhook_create
from tests.conftest import LOOPBACK_RECEIVERS, ROOT, wait_for
from tests.fixtures.webhook_receiver import Receiver, closed_port_url
from tests.integration.helpers import digits, started_study
from tests.web.pages import page_text

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker,
              pytest.mark.usefixtures("loopback_receivers")]
SECRET = "receiver-shared-secret-0001"
QUICK = {"TUNEBOARD_NOTIFY_RETRY_SECONDS": "1", "TUNEBOARD_NOTIFY_MAX_ATTEMPTS": "3",
         "TUNEBOARD_WEBHOOK_TIMEOUT_SECONDS": "2", "TUNEBOARD_WEBHOOK_ALLOWED_NETWORKS": LOOPBACK_RECEIVERS}


def _status(delivery_pk: int) -> str:
    return NotificationDelivery.objects.get(pk=delivery_pk).status


def test_a_study_finishing_on_a_worker_reaches_the_webhook_signed_and_the_opted_in_mailbox(
        acme, alice, start_worker, tmp_path):
    mailbox = tmp_path / "mail"
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    NotificationPreference.objects.create(user=alice, team=acme, events=[EventKind.STUDY_COMPLETED])
    with Receiver() as receiver:
        webhook_create(team=acme, user=alice, name="alerts", url=receiver.url, secret=SECRET,
                       events=[EventKind.STUDY_COMPLETED, EventKind.STUDY_FAILED])
        worker = start_worker(env={**QUICK, "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
                                   "EMAIL_FILE_PATH": str(mailbox)})
        study = started_study(acme, alice, digits(acme, alice), max_trials=2, epochs=1)
        wait_for(lambda: len(receiver.calls) >= 1, timeout=300,
                 what=f"the webhook call; worker log:\n{worker.log()[-3000:]}")
    study.refresh_from_db()
    assert study.status == Study.Status.COMPLETED
    (call,) = receiver.calls
    # What a receiver does: recompute the HMAC over timestamp + "." + raw body with the shared secret.
    assert verify(secret=SECRET, body=call.body, timestamp=call.headers[TIMESTAMP_HEADER],
                  signature_header=call.headers[SIGNATURE_HEADER])
    assert not verify(secret="another-secret-entirely", body=call.body, timestamp=call.headers[TIMESTAMP_HEADER],
                      signature_header=call.headers[SIGNATURE_HEADER])
    payload = json.loads(call.body)
    assert payload["event"] == "study.completed" and payload["study"]["id"] == study.id
    assert payload["study"]["trials_completed"] == 2 and f"Study “{study.name}” finished" in payload["text"]
    webhook_delivery = NotificationDelivery.objects.get(pk=int(call.headers[DELIVERY_HEADER]))
    wait_for(lambda: _status(webhook_delivery.pk) == "sent", timeout=30, what="the delivery to be recorded")
    mail_delivery = NotificationDelivery.objects.get(channel="email")
    wait_for(lambda: _status(mail_delivery.pk) == "sent", timeout=60, what="the mail delivery")
    (mail_file,) = mailbox.iterdir()
    message = message_from_string(mail_file.read_text())
    assert message["To"] == "alice@example.com"
    assert message["Subject"] == "[Tuneboard] Acme: Study finished"
    body = message.get_payload(decode=True).decode()
    assert "finished: 2 trials completed, best val_accuracy" in body and f"/studies/{study.id}/" in body


def test_a_receiver_that_is_down_is_retried_with_growing_waits_and_the_failure_shows(
        acme, alice, alice_client, start_worker, settings):
    settings.NOTIFY_MAX_ATTEMPTS = 3  # as the worker's, for the page's "tries" column
    webhook, _ = webhook_create(team=acme, user=alice, name="down", url=closed_port_url(),
                                events=[EventKind.STUDY_COMPLETED])
    worker = start_worker(env=QUICK)
    study = started_study(acme, alice, digits(acme, alice), max_trials=1, epochs=1)
    delivery = wait_for(lambda: NotificationDelivery.objects.filter(webhook=webhook).first(), timeout=300,
                        what=f"the study.completed delivery; worker log:\n{worker.log()[-3000:]}")
    wait_for(lambda: _status(delivery.pk) == "failed", timeout=120,
             what=f"the delivery to give up; worker log:\n{worker.log()[-3000:]}")
    delivery.refresh_from_db()
    assert delivery.attempts == 3 and len(delivery.history) == 3
    assert all(not entry["ok"] and entry["error"] == "Could not connect" for entry in delivery.history)
    times = [datetime.fromisoformat(entry["at"]) for entry in delivery.history]
    waits = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:], strict=False)]
    assert waits[0] >= 1 and waits[1] >= 2 and waits[1] > waits[0], waits  # 1 s, then 2 s
    html = page_text(alice_client.get(reverse("team_settings")))
    row = html.split(f'id="delivery-{delivery.id}"', 1)[1].split("</tr>", 1)[0]
    assert 'class="badge status-failed">Failed' in row and "<td>3 of 3</td>" in row
    assert "Could not connect" in row and study.name in row


def test_a_delivery_whose_task_the_broker_lost_is_sent_by_the_sweep(acme, alice, start_worker):
    with Receiver() as receiver:
        webhook, _ = webhook_create(team=acme, user=alice, name="alerts", url=receiver.url, secret=SECRET,
                                    events=[EventKind.WORKER_LOST])
        notify_webhook_test(webhook=webhook, user=alice)  # commits: its task is now in Redis...
        redis.Redis.from_url(django_settings.CELERY_BROKER_URL).flushdb()  # ...and lost, as with a Redis restart
        delivery = NotificationDelivery.objects.get(webhook=webhook)
        worker = start_worker(env=QUICK)  # no beat: the worker schedules the reaper itself
        wait_for(lambda: receiver.calls, timeout=180, what=f"the resent call; worker log:\n{worker.log()[-3000:]}")
        wait_for(lambda: _status(delivery.pk) == "sent", timeout=30, what="the delivery to be recorded")
    delivery.refresh_from_db()
    assert delivery.last_sent > delivery.created  # the sweep handed it to the broker again
    assert len(receiver.calls) == 1 and delivery.attempts == 1


EMBEDDED_SCRIPT = """
import json
from django.contrib.auth import get_user_model
from experiments.services.notifications import notify_webhook_test
from experiments.services.teams import team_create
from experiments.services.webhooks import webhook_create
user = get_user_model().objects.create_user("ada", password="x" * 12)
webhook, secret = webhook_create(team=team_create(name="Embedded", owner=user), user=user, name="local",
                                 url=URL, events=["study.completed"])
notify_webhook_test(webhook=webhook, user=user)
print(json.dumps({"secret": secret}))
"""


def test_the_embedded_worker_of_make_run_delivers_notifications(tmp_path):
    """SQLite and Celery's filesystem transport, the worker started as scripts/run_embedded.sh does."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(TUNEBOARD_VAR_DIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="2", TUNEBOARD_TF_THREADS="1",
               PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="webapp.settings",
               TUNEBOARD_WEBHOOK_ALLOWED_NETWORKS=LOOPBACK_RECEIVERS)

    def manage(*args):
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                              capture_output=True, text=True, timeout=300).stdout

    manage("migrate", "--noinput")
    with Receiver() as receiver:
        secret = json.loads(manage("shell", "-c", f"URL = {receiver.url!r}\n" + EMBEDDED_SCRIPT).splitlines()[-1])
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "webapp", "worker", "-B", "-Q", "cpu", "--concurrency", "1",
             "--schedule", str(tmp_path / "beat-schedule"), "--loglevel", "INFO"],
            cwd=ROOT, env=env, stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            wait_for(lambda: receiver.calls, timeout=180,
                     what=f"the call; worker log:\n{(tmp_path / 'worker.log').read_text()[-3000:]}")
        finally:
            os.kill(worker.pid, signal.SIGTERM)
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
    (call,) = receiver.calls
    assert verify(secret=secret["secret"], body=call.body, timestamp=call.headers[TIMESTAMP_HEADER],
                  signature_header=call.headers[SIGNATURE_HEADER])
    assert json.loads(call.body)["team"]["name"] == "Embedded"
