"""Teams people run themselves: owners invite people by username or e-mail (nobody joins without
accepting), set roles and remove people; anyone can leave or create a team; a team always keeps an owner; only owners
manage, and another team's members are invisible (404)."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from experiments.middleware import SESSION_KEY
from experiments.models import Invitation, Membership, Team
from experiments.services.memberships import membership_add, membership_set_role
from experiments.services.teams import TeamError
from tests.conftest import PASSWORD
from tests.web.pages import page_text, shows
from tests.web.test_accessibility import _Fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def dora(django_user_model):
    """An account in no team yet."""
    return django_user_model.objects.create_user(username="dora", email="Dora@Example.com", password=PASSWORD)


@pytest.fixture
def bob_client(client, bob):
    client.force_login(bob)
    return client


def _membership(team, user) -> Membership | None:
    return Membership.objects.filter(team=team, user=user).first()


def _add(client, identifier: str, role: str = "editor"):
    return client.post(reverse("team_member_add"), {"identifier": identifier, "role": role}, follow=True)


def test_the_nav_links_members_to_the_team_page(alice_client):
    response = alice_client.get(reverse("dashboard"))
    assert f'href="{reverse("team_settings")}"' in page_text(response)


def test_a_member_sees_the_member_list_with_roles(bob_client, alice, bob):
    response = bob_client.get(reverse("team_settings"))
    assert response.status_code == 200
    assert "alice" in page_text(response) and "bob" in page_text(response)
    assert "Owner" in page_text(response) and "Viewer" in page_text(response)


def test_a_viewer_sees_no_management_forms(bob_client, bob):
    html = page_text(bob_client.get(reverse("team_settings")))
    assert reverse("team_member_add") not in html
    assert reverse("team_member_role", args=[_membership(bob.memberships.get().team, bob).id]) not in html
    assert reverse("team_leave") in html  # but may leave


def _answer_from_dashboard(user, answer: str = "accept"):
    client = Client()
    client.force_login(user)
    invitation = Invitation.objects.get(accepted_at__isnull=True, declined_at__isnull=True)
    return client.post(reverse(f"invitation_{answer}_mine" if answer == "accept" else "invitation_decline",
                               args=[invitation.id]), follow=True)


def test_inviting_an_existing_account_by_username_adds_nobody_until_they_accept(alice_client, acme, dora):
    response = _add(alice_client, "dora", "viewer")
    assert shows(response, "Invitation for dora as viewer made.")
    assert _membership(acme, dora) is None, "nobody joins without accepting"
    assert Invitation.objects.get().username == "dora"

    response = _answer_from_dashboard(dora)

    assert shows(response, "Welcome to Acme: you joined as viewer.")
    assert _membership(acme, dora).role == "viewer"


def test_an_invitation_by_e_mail_reaches_the_account_with_that_address_whatever_its_case(alice_client, acme, dora):
    _add(alice_client, "  dora@example.COM ", "editor")
    assert _membership(acme, dora) is None
    client = Client()
    client.force_login(dora)
    assert "Acme" in page_text(client.get(reverse("dashboard")))  # no team yet: the invitation is on her page

    _answer_from_dashboard(dora)

    assert _membership(acme, dora).role == "editor"


def test_a_declined_invitation_adds_nobody_and_shows_as_declined_to_the_owners(alice_client, acme, dora):
    _add(alice_client, "dora", "viewer")

    response = _answer_from_dashboard(dora, "decline")

    assert shows(response, "You declined the invitation to Acme.")
    assert _membership(acme, dora) is None
    assert "declined" in page_text(alice_client.get(reverse("team_settings")))


def test_the_answer_to_add_is_the_same_whether_or_not_the_account_exists(alice_client, acme, dora):
    def message(identifier):
        found = re.search(r"Invitation for [^<]*", page_text(_add(alice_client, identifier, "viewer")))
        return found.group(0).replace(identifier, "X")

    assert message("dora") == message("nobody-here")
    assert message("dora@example.com") == message("nobody@example.com")
    assert Membership.objects.filter(team=acme).count() == 1


def test_adding_someone_who_is_already_a_member_says_so(alice_client, acme, bob):
    response = _add(alice_client, "bob", "owner")
    assert shows(response, "bob is already a member of Acme")
    assert _membership(acme, bob).role == "viewer"
    assert not Invitation.objects.exists()


def test_an_unknown_role_is_refused(alice_client, acme, dora):
    response = _add(alice_client, "dora", "admin")
    assert "admin is not one of the available choices" in page_text(response)
    assert _membership(acme, dora) is None


def test_an_owner_changes_a_role(alice_client, acme, bob):
    membership = _membership(acme, bob)
    response = alice_client.post(reverse("team_member_role", args=[membership.id]), {"role": "editor"}, follow=True)
    assert shows(response, "bob is now editor.")
    membership.refresh_from_db()
    assert membership.role == "editor"


def test_the_last_owner_cannot_be_demoted(alice_client, acme, alice):
    membership = _membership(acme, alice)
    response = alice_client.post(reverse("team_member_role", args=[membership.id]), {"role": "editor"}, follow=True)
    assert shows(response, "alice is the last owner of Acme and cannot become editor: make another member an owner "
                           "first.")
    membership.refresh_from_db()
    assert membership.role == "owner"


def test_an_owner_can_step_down_once_there_is_another_owner(alice_client, acme, alice, bob):
    membership_set_role(membership=_membership(acme, bob), role="owner")
    alice_membership = _membership(acme, alice)
    alice_client.post(reverse("team_member_role", args=[alice_membership.id]), {"role": "viewer"})
    alice_membership.refresh_from_db()
    assert alice_membership.role == "viewer"
    # No longer an owner: the management pages refuse her.
    assert alice_client.post(reverse("team_member_add"), {"identifier": "x", "role": "viewer"}).status_code == 403


def test_the_service_refuses_to_demote_the_last_owner_whoever_calls_it(acme, alice):
    with pytest.raises(TeamError, match="last owner"):
        membership_add(team=acme, user=alice, role="viewer")
    assert _membership(acme, alice).role == "owner"


def test_an_owner_removes_a_member(alice_client, acme, bob):
    membership = _membership(acme, bob)
    response = alice_client.post(reverse("team_member_remove", args=[membership.id]), follow=True)
    assert shows(response, "bob was removed from Acme.")
    assert _membership(acme, bob) is None


def test_the_last_owner_cannot_be_removed(alice_client, acme, alice):
    membership = _membership(acme, alice)
    response = alice_client.post(reverse("team_member_remove", args=[membership.id]), follow=True)
    assert shows(response, "alice is the last owner of Acme and cannot be removed")
    assert _membership(acme, alice) is not None


def test_a_removed_member_sees_no_team_any_more(alice_client, acme, bob):
    alice_client.post(reverse("team_member_remove", args=[_membership(acme, bob).id]))
    bob_client = Client()
    bob_client.force_login(bob)
    assert "No team yet" in page_text(bob_client.get(reverse("dashboard")))


def test_a_viewer_leaves_the_team(bob_client, acme, bob):
    response = bob_client.post(reverse("team_leave"), follow=True)
    assert shows(response, "You left Acme.")
    assert "No team yet" in page_text(response)
    assert _membership(acme, bob) is None


def test_the_last_owner_cannot_leave(alice_client, acme, alice):
    response = alice_client.post(reverse("team_leave"), follow=True)
    assert shows(response, "You are the last owner of Acme: make another member an owner before you leave.")
    assert _membership(acme, alice) is not None


def test_an_owner_leaves_when_another_owner_remains(alice_client, acme, alice, bob):
    membership_set_role(membership=_membership(acme, bob), role="owner")
    alice_client.post(reverse("team_leave"))
    assert _membership(acme, alice) is None
    assert list(acme.memberships.values_list("role", flat=True)) == ["owner"]


def test_leaving_one_team_keeps_you_in_the_others(alice_client, acme, alice, bob, globex):
    membership_set_role(membership=_membership(acme, bob), role="owner")
    membership_add(team=globex, user=alice, role="viewer")
    response = alice_client.post(reverse("team_leave"), follow=True)
    assert response.context["current_team"] == globex


@pytest.mark.parametrize("who", ["bob", "editor"])
def test_viewers_and_editors_cannot_manage_members(client, acme, alice, bob, dora, django_user_model, who):
    user = bob if who == "bob" else django_user_model.objects.create_user(username="eve", password=PASSWORD)
    if who == "editor":
        membership_add(team=acme, user=user, role="editor")
    client.force_login(user)
    alice_membership = _membership(acme, alice)
    invitation = Invitation.objects.create(team=acme, email="x@example.com", token_hash="0" * 64,
                                           expires="2999-01-01T00:00Z")
    posts = [
        (reverse("team_member_add"), {"identifier": "dora", "role": "owner"}),
        (reverse("team_member_add"), {"identifier": "new@example.com", "role": "owner"}),
        (reverse("team_member_role", args=[alice_membership.id]), {"role": "viewer"}),
        (reverse("team_member_remove", args=[alice_membership.id]), {}),
        (reverse("team_invitation_withdraw", args=[invitation.id]), {}),
    ]
    for url, data in posts:
        response = client.post(url, data)
        assert response.status_code == 403, url
        assert "owners can add, change or remove members" in page_text(response)  # inside the site's layout
    assert _membership(acme, dora) is None
    assert _membership(acme, alice).role == "owner"
    assert list(Invitation.objects.values_list("email", flat=True)) == ["x@example.com"]


def test_another_teams_owner_gets_404_for_acme_members_and_invitations(client, acme, alice, bob, charlie):
    client.force_login(charlie)
    bob_membership = _membership(acme, bob)
    invitation = Invitation.objects.create(team=acme, email="x@example.com", token_hash="1" * 64,
                                           expires="2999-01-01T00:00Z")
    assert client.post(reverse("team_member_role", args=[bob_membership.id]), {"role": "owner"}).status_code == 404
    assert client.post(reverse("team_member_remove", args=[bob_membership.id])).status_code == 404
    assert client.post(reverse("team_invitation_withdraw", args=[invitation.id])).status_code == 404
    assert _membership(acme, bob).role == "viewer"
    assert Invitation.objects.filter(pk=invitation.pk).exists()
    # Charlie's own team page lists none of acme's people.
    html = page_text(client.get(reverse("team_settings")))
    assert "alice" not in html and "bob" not in html


def test_a_member_of_both_teams_manages_only_the_current_one(alice_client, acme, alice, globex, charlie):
    membership_add(team=globex, user=alice, role="owner")
    charlie_membership = _membership(globex, charlie)
    # Working in acme: globex's members are not found.
    assert alice_client.post(reverse("team_member_remove", args=[charlie_membership.id])).status_code == 404
    alice_client.post(reverse("switch_team"), {"team": globex.id})
    assert alice_client.post(reverse("team_member_remove", args=[charlie_membership.id])).status_code == 302
    assert _membership(globex, charlie) is None


def test_a_logged_in_user_creates_a_team_and_becomes_its_owner(client, dora):
    client.force_login(dora)
    assert reverse("team_new") in page_text(client.get(reverse("dashboard")))  # from the no-team page
    response = client.post(reverse("team_new"), {"name": "  Initech  "}, follow=True)
    team = Team.objects.get(name="Initech")
    assert _membership(team, dora).role == "owner"
    assert shows(response, "Team Initech created; you are its owner.")
    assert client.session[SESSION_KEY] == team.id
    assert response.context["current_team"] == team


def test_creating_a_team_switches_to_it_from_another_team(alice_client, alice):
    alice_client.post(reverse("team_new"), {"name": "Skunkworks"})
    assert alice_client.get(reverse("dashboard")).context["current_team"].name == "Skunkworks"
    assert Membership.objects.filter(user=alice).count() == 2


def test_a_team_name_in_use_is_refused_whatever_its_case(alice_client, acme):
    response = alice_client.post(reverse("team_new"), {"name": "ACME"})
    assert response.status_code == 200
    assert shows(response, "A team named ACME already exists")
    assert Team.objects.count() == 1


def test_an_empty_team_name_is_refused(alice_client):
    response = alice_client.post(reverse("team_new"), {"name": "   "})
    assert response.status_code == 200
    assert Team.objects.count() == 1


def test_team_pages_refuse_posts_without_a_csrf_token(alice, acme, dora):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("team_member_add"), {"identifier": "dora", "role": "owner"}).status_code == 403
    assert client.post(reverse("team_new"), {"name": "Forged"}).status_code == 403
    assert _membership(acme, dora) is None
    assert not Team.objects.filter(name="Forged").exists()


def test_team_pages_label_every_field(alice_client, acme):
    Invitation.objects.create(team=acme, email="x@example.com", token_hash="2" * 64, expires="2999-01-01T00:00Z")
    for url in (reverse("team_settings"), reverse("team_new")):
        parser = _Fields()
        parser.feed(page_text(alice_client.get(url)))
        assert parser.unlabelled() == [], url
        assert parser.header_cells >= parser.tables, url
