"""Passwords: a logged-in user changes theirs from the header; someone locked out resets it
through a link e-mailed by the configured backend (Django's locmem backend in tests)."""

import re
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse

from tests.conftest import PASSWORD
from tests.web.pages import page_text, shows
from tests.web.test_accessibility import _Fields

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture
def alice_with_email(alice):
    alice.email = "alice@example.com"
    alice.save()
    return alice


def _labelled(response) -> list[str]:
    parser = _Fields()
    parser.feed(page_text(response))
    return parser.unlabelled()


def test_the_header_links_to_change_password_and_login_to_reset(alice_client, client):
    assert f'href="{reverse("password_change")}"' in page_text(alice_client.get(reverse("dashboard")))
    alice_client.logout()
    login = client.get(reverse("login"))
    assert f'href="{reverse("password_reset")}"' in page_text(login)
    assert "Forgot your password?" in page_text(login)


def test_a_user_changes_their_password(alice_client, alice):
    page = alice_client.get(reverse("password_change"))
    assert page.status_code == 200 and _labelled(page) == []
    response = alice_client.post(reverse("password_change"), {
        "old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}, follow=True)
    assert shows(response, "Password changed")
    assert response.context["user"].is_authenticated  # still logged in here
    assert Client().login(username="alice", password=NEW_PASSWORD)
    assert not Client().login(username="alice", password=PASSWORD)


def test_a_wrong_old_password_or_a_short_new_one_changes_nothing(alice_client):
    wrong = alice_client.post(reverse("password_change"), {
        "old_password": "not it", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert "Your old password was entered incorrectly" in page_text(wrong)
    short = alice_client.post(reverse("password_change"), {
        "old_password": PASSWORD, "new_password1": "short", "new_password2": "short"})
    assert "This password is too short" in page_text(short)
    assert Client().login(username="alice", password=PASSWORD)


def test_changing_a_password_needs_a_login(client):
    response = client.get(reverse("password_change"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_a_forgotten_password_is_reset_through_the_e_mailed_link(client, alice_with_email):
    page = client.get(reverse("password_reset"))
    assert page.status_code == 200 and _labelled(page) == []
    response = client.post(reverse("password_reset"), {"email": "ALICE@example.com"}, follow=True)
    assert shows(response, "Check your e-mail")
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["alice@example.com"]
    assert message.subject == "Reset your Tuneboard password"
    assert "alice" in message.body
    link = re.search(r"http://testserver(/password/reset/\S+/\S+/)", message.body).group(1)

    # Django swaps the token for a session marker, then shows the form.
    form_page = client.get(link, follow=True)
    assert shows(form_page, "Choose a new password")
    assert _labelled(form_page) == []
    set_url = urlsplit(form_page.redirect_chain[-1][0]).path
    done = client.post(set_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}, follow=True)
    assert shows(done, "Password set")
    assert Client().login(username="alice", password=NEW_PASSWORD)

    # The link works once.
    again = client.get(link, follow=True)
    assert shows(again, "This reset link does not work")


def test_an_unknown_address_shows_the_same_page_and_sends_nothing(client, alice_with_email):
    response = client.post(reverse("password_reset"), {"email": "nobody@example.com"}, follow=True)
    assert shows(response, "Check your e-mail")
    assert mail.outbox == []


def test_a_tampered_reset_link_says_it_does_not_work(client, alice_with_email):
    response = client.get(reverse("password_reset_confirm", kwargs={"uidb64": "MQ", "token": "bad-token"}),
                          follow=True)
    assert response.status_code == 200
    assert shows(response, "This reset link does not work")
