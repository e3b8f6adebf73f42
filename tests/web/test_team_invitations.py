"""Invitation links: an owner invites an e-mail address and gets a link (shown once, e-mailed when
mail is configured, stored only as a hash); whoever opens it signs up or logs in and, by accepting,
joins with the invited role; unknown, withdrawn, expired and used links give a clear page, never
an error."""

import hashlib
import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiments.middleware import SESSION_KEY
from experiments.models import Invitation, Membership
from experiments.services.invitations import invitation_create
from tests.conftest import PASSWORD
from tests.web.pages import page_text, shows
from tests.web.test_accessibility import _Fields

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a brand new passphrase"


class FailingEmailBackend:
    """A mail server that refuses the connection."""

    def __init__(self, *args, **kwargs):
        pass

    def send_messages(self, messages):
        raise ConnectionRefusedError("[Errno 111] Connection refused")


def _invite(client, email: str = "ada@example.com", role: str = "viewer"):
    response = client.post(reverse("team_member_add"), {"identifier": email, "role": role}, follow=True)
    assert response.status_code == 200
    return response


def _link_path(response) -> str:
    return urlsplit(response.context["new_link"]["link"]).path


def _sign_up(client, path: str, username: str = "ada", password: str = NEW_PASSWORD):
    return client.post(path, {"username": username, "password1": password, "password2": password}, follow=True)


@pytest.fixture
def invitation_path(alice_client):
    """The link alice made for ada@example.com (viewer). alice_client is the `client` fixture,
    logged out afterwards so tests use it as the invited person."""
    path = _link_path(_invite(alice_client))
    alice_client.logout()
    return path


def test_an_invitation_is_stored_only_as_a_hash(alice_client, acme, alice):
    response = _invite(alice_client, "ada@example.com", "editor")
    invitation = Invitation.objects.get()
    assert (invitation.team, invitation.email, invitation.role, invitation.created_by) == (
        acme, "ada@example.com", "editor", alice)
    token = _link_path(response).rstrip("/").rsplit("/", 1)[1]
    assert invitation.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(Invitation.objects.values().get())
    assert timedelta(days=6, hours=23) < invitation.expires - timezone.now() <= timedelta(days=7)


def test_the_link_is_shown_once_and_listed_as_open_invitation(alice_client):
    response = _invite(alice_client)
    link = response.context["new_link"]["link"]
    assert link.startswith("http://testserver/invitations/")
    assert f'value="{link}"' in page_text(response)
    again = alice_client.get(reverse("team_settings"))
    assert link not in page_text(again)
    assert "ada@example.com" in page_text(again)  # still listed, without its link


def test_the_invitation_is_e_mailed_with_its_link(alice_client):
    response = _invite(alice_client)
    assert shows(response, "It was e-mailed to ada@example.com; the link is also below.")
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["ada@example.com"]
    assert message.subject == "Invitation to Acme on Tuneboard"
    assert response.context["new_link"]["link"] in message.body
    assert "alice invites you" in message.body


def test_a_failing_mail_server_is_reported_and_the_link_still_shown(alice_client, settings):
    settings.EMAIL_BACKEND = f"{__name__}.FailingEmailBackend"
    response = _invite(alice_client)
    assert shows(response, "E-mailing ada@example.com failed: pass the link below on yourself.")
    assert response.context["new_link"]["link"] in page_text(response)
    assert Invitation.objects.count() == 1


def test_without_a_mail_server_the_owner_is_told_to_pass_the_link_on(alice_client, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
    response = _invite(alice_client)
    assert shows(response, "No mail server is configured, so pass the link below on yourself.")
    assert response.context["new_link"]["link"] in page_text(response)


def test_the_expiry_follows_the_setting(alice_client, settings):
    settings.INVITATION_DAYS = 2
    _invite(alice_client)
    remaining = Invitation.objects.get().expires - timezone.now()
    assert timedelta(days=1, hours=23) < remaining <= timedelta(days=2)


def test_inviting_the_same_address_again_replaces_the_earlier_link(alice_client):
    client = Client()
    first = _link_path(_invite(alice_client))
    second = _link_path(_invite(alice_client))
    assert Invitation.objects.count() == 1
    assert client.get(first).status_code == 404
    assert client.get(second).status_code == 200


def test_someone_opening_the_link_sees_the_team_the_role_and_a_sign_up_form(client, invitation_path):
    response = client.get(invitation_path)
    assert response.status_code == 200
    assert shows(response, "Join Acme")
    assert "viewer" in page_text(response)
    assert "Sign up and join" in page_text(response)
    assert f'{reverse("login")}?next={invitation_path}' in page_text(response)
    parser = _Fields()
    parser.feed(page_text(response))
    assert parser.unlabelled() == []


def test_signing_up_through_the_link_joins_the_team_with_the_invited_role(client, acme, invitation_path):
    response = _sign_up(client, invitation_path)
    assert response.redirect_chain[-1][0] == reverse("dashboard")
    assert shows(response, "Welcome to Acme: you joined as viewer.")
    assert response.context["user"].username == "ada"
    assert response.context["current_team"] == acme
    membership = Membership.objects.get(user__username="ada")
    assert (membership.team, membership.role) == (acme, "viewer")
    assert membership.user.email == "ada@example.com"
    assert not membership.user.is_staff
    invitation = Invitation.objects.get()
    assert invitation.accepted_at is not None and invitation.accepted_by == membership.user
    # The new password works for later log-ins.
    assert Client().login(username="ada", password=NEW_PASSWORD)


def test_a_used_link_gives_a_clear_page(client, invitation_path):
    _sign_up(client, invitation_path)
    client.logout()
    response = client.get(invitation_path)
    assert response.status_code == 410
    assert shows(response, "This invitation to Acme has already been used.")
    response = _sign_up(client, invitation_path, username="mallory")
    assert response.status_code == 410
    assert not Membership.objects.filter(user__username="mallory").exists()


def test_sign_up_applies_the_password_validators(client, invitation_path):
    response = _sign_up(client, invitation_path, password="short")
    assert response.status_code == 200
    assert "This password is too short" in page_text(response)
    assert not Membership.objects.filter(user__username="ada").exists()
    assert Invitation.objects.get().accepted_at is None


def test_sign_up_refuses_a_username_in_use(client, alice, invitation_path):
    response = _sign_up(client, invitation_path, username="ALICE")
    assert response.status_code == 200
    assert "A user with that username already exists." in page_text(response)
    assert Invitation.objects.get().accepted_at is None


def test_someone_with_an_account_logs_in_and_joins(client, acme, charlie, invitation_path):
    login_page = client.get(f'{reverse("login")}?next={invitation_path}')
    assert login_page.status_code == 200
    response = client.post(reverse("login"), {"username": "charlie", "password": PASSWORD,
                                              "next": invitation_path})
    assert response["Location"] == invitation_path
    page = client.get(invitation_path)
    assert "Accept: join Acme as charlie" in page_text(page)
    response = client.post(invitation_path, follow=True)
    assert shows(response, "Welcome to Acme: you joined as viewer.")
    assert Membership.objects.get(team=acme, user=charlie).role == "viewer"
    assert client.session[SESSION_KEY] == acme.id  # lands on the team just joined


def test_a_member_following_an_invitation_keeps_their_role(client, acme, alice, bob):
    _, token = invitation_create(team=acme, email="bob@example.com", role="owner", created_by=alice)
    client.force_login(bob)
    response = client.post(reverse("invitation_accept", args=[token]), follow=True)
    assert shows(response, "You are already a member of Acme (viewer); your role is unchanged.")
    assert Membership.objects.get(team=acme, user=bob).role == "viewer"


def test_opening_the_link_logged_in_does_not_join_until_confirmed(client, acme, charlie, invitation_path):
    client.force_login(charlie)
    assert client.get(invitation_path).status_code == 200
    assert not Membership.objects.filter(team=acme, user=charlie).exists()


def test_an_expired_link_gives_a_clear_page(client, acme, alice):
    _, token = invitation_create(team=acme, email="ada@example.com", role="editor", created_by=alice)
    Invitation.objects.update(expires=timezone.now() - timedelta(minutes=1))
    for response in (client.get(reverse("invitation_accept", args=[token])),
                     _sign_up(client, reverse("invitation_accept", args=[token]))):
        assert response.status_code == 410
        assert "This invitation to Acme expired on" in page_text(response)
        assert shows(response, "Ask the team's owner for a new one.")
    assert not Membership.objects.filter(user__username="ada").exists()


@pytest.mark.parametrize("token", ["nonsense", "x" * 43, "a-b_c"])
def test_an_unknown_link_gives_a_clear_page(client, alice, token):
    response = client.get(reverse("invitation_accept", args=[token]))
    assert response.status_code == 404
    assert shows(response, "This invitation is not valid")
    client.force_login(alice)
    assert client.post(reverse("invitation_accept", args=[token])).status_code == 404


def test_a_withdrawn_link_stops_working(alice_client):
    client = Client()
    path = _link_path(_invite(alice_client))
    invitation = Invitation.objects.get()
    response = alice_client.post(reverse("team_invitation_withdraw", args=[invitation.id]), follow=True)
    assert shows(response, "The invitation of ada@example.com was withdrawn; its link no longer works.")
    assert client.get(path).status_code == 404


def test_an_invitation_for_an_owner_makes_an_owner(alice_client, acme):
    client = Client()
    path = _link_path(_invite(alice_client, "co@example.com", "owner"))
    _sign_up(client, path, username="co")
    assert Membership.objects.get(team=acme, user__username="co").role == "owner"


def test_the_sign_up_form_refuses_a_post_without_csrf_token(invitation_path):
    client = Client(enforce_csrf_checks=True)
    response = client.post(invitation_path, {"username": "ada", "password1": NEW_PASSWORD,
                                             "password2": NEW_PASSWORD})
    assert response.status_code == 403
    assert not Membership.objects.filter(user__username="ada").exists()


def test_the_e_mailed_link_is_the_one_that_works(alice_client, acme):
    client = Client()
    _invite(alice_client)
    link = re.search(r"https?://\S+/invitations/\S+/", mail.outbox[0].body).group(0)
    _sign_up(client, urlsplit(link).path)
    assert Membership.objects.filter(team=acme, user__username="ada").exists()
