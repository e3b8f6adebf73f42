"""The team hijack, replayed: mallory makes a team whose name sorts first and "adds" alice. Alice
is not a member until she accepts; her logins never open a team she has not joined; her token,
made for her team, creates nothing anywhere else; and the form told mallory nothing about which
accounts exist. Tokens act in their one team with at most their role, and never more than the
user's role there now."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from experiments.middleware import SESSION_KEY
from experiments.models import ApiToken, Dataset, Membership, Team
from experiments.services.memberships import membership_add, membership_set_role
from experiments.services.teams import team_create
from tests.api.conftest import make_token
from tests.conftest import PASSWORD
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def mallory(django_user_model):
    return django_user_model.objects.create_user("mallory", email="mallory@example.com", password=PASSWORD)


@pytest.fixture
def trap(mallory) -> Team:
    return team_create(name="AAA Trap", owner=mallory)


@pytest.fixture
def mallory_client(mallory, trap):
    client = Client()
    client.force_login(mallory)
    client.post(reverse("switch_team"), {"team": trap.id})
    return client


def _add(client, identifier):
    response = client.post(reverse("team_member_add"), {"identifier": identifier, "role": "editor"}, follow=True)
    return re.search(r"Invitation for [^<]*", page_text(response)).group(0).replace(identifier, "X")


def _api(token, **headers):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", **headers)
    return client


def test_adding_alice_makes_an_invitation_and_she_is_not_a_member(mallory_client, trap, alice):
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    _add(mallory_client, "alice")
    _add(mallory_client, "alice@example.com")
    assert not Membership.objects.filter(team=trap, user=alice).exists()
    page = page_text(mallory_client.get(reverse("team_settings")))
    members = page.split('id="members"')[1].split("</table>")[0]
    invitations = page.split('id="invitations"')[1].split("</table>")[0]
    assert "alice" not in members and "alice@example.com" in invitations


def test_alices_login_never_opens_a_team_she_has_not_joined(mallory_client, trap, acme, alice):
    _add(mallory_client, "alice")
    client = Client()
    assert client.post(reverse("login"), {"username": "alice", "password": PASSWORD}).status_code == 302
    dashboard = client.get(reverse("dashboard"))
    assert dashboard.context["current_team"] == acme
    assert "AAA Trap" in page_text(dashboard)  # offered, on her own dashboard, to accept or decline


def test_a_new_login_opens_the_team_chosen_last_never_the_first_by_name(alice, acme, globex):
    membership_add(team=globex, user=alice, role="viewer")  # joined later; "Acme" < "Globex" anyway
    client = Client()
    client.force_login(alice)
    assert client.get(reverse("dashboard")).context["current_team"] == acme  # the oldest membership
    client.post(reverse("switch_team"), {"team": globex.id})
    again = Client()
    again.force_login(alice)
    assert again.get(reverse("dashboard")).context["current_team"] == globex
    assert SESSION_KEY not in again.session or again.session[SESSION_KEY] != acme.id


def test_alices_token_for_acme_creates_nothing_in_another_team(mallory_client, trap, acme, alice):
    _add(mallory_client, "alice")
    token = make_token(alice, team=acme)
    # Even once she has joined the trap team, her Acme token stays in Acme.
    invitation = trap.invitations.get()
    alice_client = Client()
    alice_client.force_login(alice)
    alice_client.post(reverse("invitation_accept_mine", args=[invitation.id]))
    assert Membership.objects.filter(team=trap, user=alice).exists()

    created = _api(token).post("/api/v1/datasets/", {"bundled_name": "iris"}, format="json")
    assert created.status_code == 201 and Dataset.objects.get(pk=created.json()["id"]).team == acme

    refused = _api(token, HTTP_X_TUNEBOARD_TEAM=str(trap.id)).post("/api/v1/datasets/", {"bundled_name": "wine"},
                                                                    format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith(f"This token acts for team {acme.id} only")
    assert not Dataset.objects.filter(team=trap).exists()


def test_the_answer_to_add_tells_nothing_about_who_has_an_account(mallory_client, alice):
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    assert _add(mallory_client, "alice") == _add(mallory_client, "no-such-user")
    assert _add(mallory_client, "alice@example.com") == _add(mallory_client, "nobody@example.com")


def test_member_addresses_are_shown_to_owners_only(alice_client, acme, bob):
    bob.email = "bob@example.com"
    bob.save(update_fields=["email"])
    assert "bob@example.com" in page_text(alice_client.get(reverse("team_settings")))
    viewer = Client()
    viewer.force_login(bob)
    page = page_text(viewer.get(reverse("team_settings")))
    assert "bob@example.com" not in page and "E-mail" not in page.split('id="members"')[1].split("</thead>")[0]


def test_a_viewer_token_of_an_owner_cannot_write(alice, acme):
    from experiments.services.api_tokens import api_token_create

    _, token = api_token_create(user=alice, name="read only", team_id=acme.id, role="viewer")
    assert _api(token).get("/api/v1/datasets/").status_code == 200
    assert _api(token).post("/api/v1/datasets/", {"bundled_name": "iris"}, format="json").status_code == 403
    assert not Dataset.objects.exists()


def test_a_token_follows_its_users_role_down_and_stops_when_they_leave(alice, bob, acme):
    membership_set_role(membership=Membership.objects.get(user=bob), role="editor")
    token = make_token(bob)  # an editor token
    membership_set_role(membership=Membership.objects.get(user=bob), role="viewer")
    assert _api(token).post("/api/v1/datasets/", {"bundled_name": "iris"}, format="json").status_code == 403
    Membership.objects.get(user=bob).delete()
    refused = _api(token).get("/api/v1/datasets/")
    assert refused.status_code == 403 and "no longer a member" in refused.json()["detail"]


def test_a_token_cannot_be_made_above_the_users_role_or_for_a_team_not_theirs(bob, acme, globex):
    client = Client()
    client.force_login(bob)  # a viewer of Acme
    above = client.post(reverse("api_tokens"), {"name": "x", "team": acme.id, "role": "editor"})
    assert "You are viewer in Acme, so a token of yours there can be viewer at most." in page_text(above)
    other = client.post(reverse("api_tokens"), {"name": "x", "team": globex.id, "role": "viewer"})
    assert "Select a valid choice" in page_text(other)
    assert not ApiToken.objects.filter(user=bob).exists()
