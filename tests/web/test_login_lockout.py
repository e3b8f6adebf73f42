"""Login rate limiting through the real login page: after LOGIN_FAILURE_LIMIT failures for one
username from one address, that pair is refused (even with the right password) with a message
saying how long to wait, until the cool-off has passed; other users and other addresses are
not affected, and X-Forwarded-For counts only when proxies are configured as trusted."""

import time
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import SESSION_KEY
from django.core.management import call_command
from django.test import Client, RequestFactory
from django.urls import reverse

from experiments.security.login_limits import client_ip
from tests.conftest import PASSWORD
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db

LOCKED = "Too many failed attempts; try again in"
MISMATCH = "Your username and password didn't match"


def attempt(client, username, password, **headers):
    return client.post(reverse("login"), {"username": username, "password": password}, **headers)


def logged_in(response) -> bool:
    return response.status_code == 302 and SESSION_KEY in response.client.session


def fail(client, username, times, **headers):
    return [attempt(client, username, "wrong password", **headers) for _ in range(times)]


def test_failures_lock_the_user_out_with_a_message_and_the_right_password_is_refused(client, alice, settings):
    limit = settings.AXES_FAILURE_LIMIT
    before = fail(client, "alice", limit - 1)
    assert all(r.status_code == 200 and MISMATCH in page_text(r) for r in before)
    assert LOCKED not in page_text(before[-1])

    locked = fail(client, "alice", 1)[0]
    assert locked.status_code == 429
    text = page_text(locked)
    assert f"{LOCKED} {settings.LOGIN_LOCKOUT_MINUTES} minutes." in text
    assert MISMATCH not in text
    assert 'name="password"' in text and 'value="alice"' in text  # the form is still there

    right = attempt(client, "alice", PASSWORD)
    assert right.status_code == 429 and LOCKED in page_text(right)
    assert SESSION_KEY not in client.session
    assert AccessAttempt.objects.get(username="alice").failures_since_start > limit


def test_the_lockout_ends_after_the_cool_off(client, alice, settings):
    settings.AXES_COOLOFF_TIME = timedelta(seconds=1)
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    refused = attempt(client, "alice", PASSWORD)
    assert refused.status_code == 429
    assert f"{LOCKED} 1 minute." in page_text(refused)

    time.sleep(1.2)
    assert logged_in(attempt(client, "alice", PASSWORD))


def test_an_administrator_lifts_a_lockout_early(client, alice, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    assert attempt(client, "alice", PASSWORD).status_code == 429
    call_command("axes_reset_username", "alice")
    assert logged_in(attempt(client, "alice", PASSWORD))


def test_other_users_and_other_addresses_can_still_log_in(client, alice, bob, settings):
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    assert attempt(client, "alice", PASSWORD).status_code == 429

    assert logged_in(attempt(Client(), "bob", PASSWORD))  # same address, another user
    assert logged_in(attempt(Client(REMOTE_ADDR="192.0.2.7"), "alice", PASSWORD))  # same user, elsewhere


def test_a_successful_login_resets_the_count(client, alice, settings):
    limit = settings.AXES_FAILURE_LIMIT
    fail(client, "alice", limit - 1)
    assert logged_in(attempt(client, "alice", PASSWORD))
    client.logout()
    assert fail(client, "alice", limit - 1)[-1].status_code == 200
    assert logged_in(attempt(client, "alice", PASSWORD))


def test_the_admin_login_shares_the_lockout(client, alice, settings):
    alice.is_staff = alice.is_superuser = True
    alice.save()
    fail(client, "alice", settings.AXES_FAILURE_LIMIT)
    response = client.post(reverse("admin:login"), {"username": "alice", "password": PASSWORD})
    assert response.status_code == 429 and LOCKED in page_text(response)
    assert SESSION_KEY not in client.session


def test_forwarded_for_is_ignored_without_trusted_proxies(client, alice, settings):
    settings.TRUSTED_PROXY_COUNT = 0
    for n in range(settings.AXES_FAILURE_LIMIT):
        attempt(client, "alice", "wrong password", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    # A new forged address does not escape the lock: the client is still REMOTE_ADDR.
    response = attempt(client, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.200")
    assert response.status_code == 429


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(client, alice, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    # The client may put anything in front; the proxy appends the address it saw.
    fail(client, "alice", settings.AXES_FAILURE_LIMIT, HTTP_X_FORWARDED_FOR="203.0.113.9, 198.51.100.1")
    assert attempt(client, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.1").status_code == 429
    assert attempt(client, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.9, 198.51.100.1").status_code == 429
    # Another client behind the same proxy (same REMOTE_ADDR) is not locked out.
    assert logged_in(attempt(client, "alice", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.2"))


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "198.51.100.1", "10.0.0.2"),
        (1, "198.51.100.1", "198.51.100.1"),
        (1, "203.0.113.9, 198.51.100.1", "198.51.100.1"),
        (2, "203.0.113.9, 198.51.100.1, 10.0.0.3", "198.51.100.1"),
        (1, "", "10.0.0.2"),  # no header: the proxy's own request (a probe), its address
        (2, "198.51.100.1", "10.0.0.2"),  # fewer hops than proxies: nothing trustworthy in it
        (1, "not-an-address", "10.0.0.2"),
        (1, " 2001:db8::1 ", "2001:db8::1"),
    ],
)
def test_client_ip(settings, proxies, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected
