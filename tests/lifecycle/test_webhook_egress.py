"""Webhooks reach public addresses only. Each URL of the matrix below is refused when it is saved
or, saved before the policy (or resolving differently later), blocked when it is sent; a real
listener on the loopback address records no connection either way. A network the deployment
allows receives deliveries; a receiver's error body, reason phrase or banner never reaches a
page, an API answer or the log."""

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.urls import reverse

from experiments.models import EventKind, NotificationDelivery, Webhook
from experiments.security import egress
from experiments.services.notification_delivery import BLOCKED, delivery_attempt
from experiments.services.notifications import notify_webhook_test
from experiments.services.webhooks import WebhookError, webhook_create
from tests.api.conftest import token_client
from tests.fixtures.webhook_receiver import Receiver
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db
SECRET_BODY = "TOP-SECRET-BODY-7731"
SECRET_REASON = "TOP-SECRET-REASON-4410"
BANNER = "SSH-2.0-OpenSSH_9.6 TOP-SECRET-BANNER-9902"


class Listener:
    """A bare TCP listener that counts the connections it accepts (and, if told, says a banner)."""

    def __init__(self, host: str = "127.0.0.1", family=socket.AF_INET, banner: str = ""):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.banner = banner.encode()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            if self.banner:
                conn.sendall(self.banner + b"\r\n")
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def fake_dns(monkeypatch):
    """Names this test controls: what each resolves to, a list when the answer changes per lookup."""
    answers: dict[str, list[str]] = {}
    real = egress.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host in answers:
            queue = answers[host]
            record = queue.pop(0) if len(queue) > 1 else queue[0]  # "a,b": one answer of two addresses
            return [(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                     (address, port)) for address in record.split(",")]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(egress, "getaddrinfo", resolve)
    return answers


# {port} is the loopback listener's. At least 30, as the issue asks.
REFUSED = [
    "http://127.0.0.1:{port}/hook", "http://127.0.0.2:{port}/hook", "http://localhost:{port}/hook",
    "http://[::1]:{port}/hook", "http://[::ffff:127.0.0.1]:{port}/hook", "http://[::ffff:7f00:1]:{port}/hook",
    "http://0.0.0.0:{port}/hook", "http://[::]:{port}/hook", "http://169.254.169.254/latest/meta-data/",
    "http://[fe80::1]:{port}/hook", "http://10.0.0.1/hook", "http://10.255.255.254/hook", "http://172.16.0.1/hook",
    "http://172.31.255.254/hook", "http://192.168.1.1/hook", "http://192.168.255.254/hook",
    "http://100.64.0.1/hook", "http://100.127.255.254/hook", "http://[fc00::1]/hook", "http://[fd12:3456::1]/hook",
    "http://[fe80::abcd:1]/hook", "http://224.0.0.1/hook", "http://[ff02::1]/hook", "http://240.0.0.1/hook",
    "http://255.255.255.255/hook", "http://198.18.0.1/hook", "http://192.0.2.10/hook",
    "http://[64:ff9b::a00:1]/hook", "http://[2002:7f00:1::]:{port}/hook", "http://127.1:{port}/hook",
    "http://2130706433:{port}/hook", "http://loopback.example.net:{port}/hook", "http://private.example.net/hook",
    "http://mixed.example.net/hook", "http://user:pass@hooks.example.com/hook", "https://token@hooks.example.com/x",
]


def _dns(fake_dns):
    # mixed: one private answer among public ones (which one a client takes is not ours to know).
    fake_dns.update({"loopback.example.net": ["127.0.0.1"], "private.example.net": ["10.1.2.3"],
                     "mixed.example.net": ["93.184.215.14,127.0.0.1"]})


def test_the_matrix_has_at_least_30_urls():
    assert len(REFUSED) >= 30


@pytest.mark.parametrize("template", REFUSED)
def test_an_internal_url_is_refused_at_save_and_blocked_at_send_without_a_connection(
        acme, alice, listener, fake_dns, template):
    _dns(fake_dns)
    url = template.format(port=listener.port)
    with pytest.raises(WebhookError):
        webhook_create(team=acme, user=alice, name="x", url=url, events=[EventKind.STUDY_COMPLETED])
    assert not Webhook.objects.exists()

    # Saved before the policy existed: the send refuses it, at once and for good.
    webhook = Webhook.objects.create(team=acme, name="old", url=url, secret="s" * 24,
                                     events=[EventKind.STUDY_COMPLETED])
    notify_webhook_test(webhook=webhook, user=alice)
    delivery = NotificationDelivery.objects.get(webhook=webhook)
    assert delivery_attempt(delivery_pk=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert (delivery.last_error, delivery.attempts, delivery.response_code) == (BLOCKED, 1, None)
    assert listener.connections == 0, "nothing reached the loopback listener"


def test_a_name_that_answers_public_at_save_and_loopback_at_send_is_blocked(acme, alice, listener, fake_dns):
    fake_dns["rebind.example.org"] = ["93.184.215.14", "127.0.0.1"]
    webhook, _ = webhook_create(team=acme, user=alice, name="rebind", url=f"http://rebind.example.org:{listener.port}/",
                                events=[EventKind.STUDY_COMPLETED])
    notify_webhook_test(webhook=webhook, user=alice)
    delivery = NotificationDelivery.objects.get(webhook=webhook)
    assert delivery_attempt(delivery_pk=delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert delivery.last_error == BLOCKED and listener.connections == 0


def test_an_allowed_network_receives_deliveries_and_nothing_outside_it_does(acme, alice, settings, listener):
    import ipaddress

    settings.WEBHOOK_ALLOWED_NETWORKS = [ipaddress.ip_network("127.0.0.1/32")]
    with Receiver() as receiver:
        webhook, _ = webhook_create(team=acme, user=alice, name="internal", url=receiver.url,
                                    events=[EventKind.STUDY_COMPLETED])
        notify_webhook_test(webhook=webhook, user=alice)
        assert delivery_attempt(delivery_pk=NotificationDelivery.objects.get(webhook=webhook).pk) == "sent"
    assert len(receiver.calls) == 1
    other = Listener(host="127.0.0.2")
    try:
        with pytest.raises(WebhookError):
            webhook_create(team=acme, user=alice, name="other", url=f"http://127.0.0.2:{other.port}/",
                           events=[EventKind.STUDY_COMPLETED])
        assert other.connections == 0
    finally:
        other.close()


class SecretAnswer(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(500, SECRET_REASON)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(SECRET_BODY.encode() * 20)

    def log_message(self, *args):
        pass


def test_a_receivers_error_body_and_reason_reach_no_page_api_answer_or_log(
        acme, alice, alice_client, loopback_receivers, caplog):
    caplog.set_level(logging.DEBUG)
    server = ThreadingHTTPServer(("127.0.0.1", 0), SecretAnswer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        webhook, _ = webhook_create(team=acme, user=alice, name="leaky", events=[EventKind.STUDY_COMPLETED],
                                    url=f"http://127.0.0.1:{server.server_address[1]}/hook")
        notify_webhook_test(webhook=webhook, user=alice)
        delivery = NotificationDelivery.objects.get(webhook=webhook)
        assert delivery_attempt(delivery_pk=delivery.pk) == "retry"
    finally:
        server.shutdown()
        server.server_close()
    delivery.refresh_from_db()
    assert (delivery.last_error, delivery.response_code) == ("HTTP 500", 500)
    everywhere = [page_text(alice_client.get(reverse("team_settings"))),
                  token_client(alice).get("/api/v1/deliveries/").content.decode(), caplog.text, str(delivery.history)]
    for text in everywhere:
        assert SECRET_BODY not in text and SECRET_REASON not in text


def test_a_service_that_is_not_http_is_one_error_class_and_its_banner_is_kept_nowhere(
        acme, alice, alice_client, loopback_receivers, caplog):
    banner = Listener(banner=BANNER)
    try:
        webhook, _ = webhook_create(team=acme, user=alice, name="ssh", url=f"http://127.0.0.1:{banner.port}/",
                                    events=[EventKind.STUDY_COMPLETED])
        notify_webhook_test(webhook=webhook, user=alice)
        delivery = NotificationDelivery.objects.get(webhook=webhook)
        delivery_attempt(delivery_pk=delivery.pk)
    finally:
        banner.close()
    delivery.refresh_from_db()
    assert delivery.last_error == "Could not connect"
    for text in (page_text(alice_client.get(reverse("team_settings"))), caplog.text, str(delivery.history),
                 token_client(alice).get("/api/v1/deliveries/").content.decode()):
        assert "TOP-SECRET-BANNER" not in text


def test_refused_and_unresolvable_look_the_same(acme, alice, fake_dns):
    """No port scanning or internal-name probing through the error message."""
    fake_dns["gone.example.net"] = ["10.9.9.9"]
    messages = set()
    for url in ("http://gone.example.net/", "http://does-not-resolve.invalid/", "http://10.0.0.8:22/"):
        with pytest.raises(WebhookError) as error:
            webhook_create(team=acme, user=alice, name="x", url=url, events=[EventKind.STUDY_COMPLETED])
        messages.add(str(error.value).split(", and ")[1].split(" is not one")[1])
    assert len(messages) == 1
