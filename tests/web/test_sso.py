"""Single sign-on against a local OpenID provider (oidc-provider-mock, in this process): the
authorization-code flow through mozilla-django-oidc, accounts linked by the provider's subject and
never by e-mail, identity provider groups mapped to team roles (a newcomer is invited, never joined
without accepting), the logins and role changes in the audit log, and local passwords still working."""

from urllib.parse import quote

import httpx
import oidc_provider_mock
import pytest
from django.contrib.auth import get_user_model

from experiments.models import AuditEvent, Invitation, Membership
from experiments.services.memberships import membership_add
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


@pytest.fixture
def provider(settings):
    with oidc_provider_mock.run_server_in_thread() as server:
        base = f"http://localhost:{server.server_port}"
        settings.SSO_ENABLED, settings.SSO_PROVIDER_NAME = True, "Example ID"
        settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "tuneboard", "secret"
        settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{base}/oauth2/authorize"
        settings.OIDC_OP_TOKEN_ENDPOINT = f"{base}/oauth2/token"
        settings.OIDC_OP_USER_ENDPOINT = f"{base}/userinfo"
        settings.OIDC_OP_JWKS_ENDPOINT = f"{base}/jwks"
        settings.OIDC_VERIFY_KID = False  # the mock signs with one key and names none in its tokens
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "experiments.services.sso.SsoBackend"]
        settings.SSO_GROUP_ROLES = [("ml", "Acme", "editor"), ("ml-leads", "Acme", "owner")]
        yield base


def sso_login(client, provider: str, sub: str, claims: dict):
    assert httpx.put(f"{provider}/users/{quote(sub)}", json=claims).status_code == 204
    start = client.get("/sso/start/")
    assert start.status_code == 302 and start["Location"].startswith(f"{provider}/oauth2/authorize")
    answer = httpx.post(start["Location"], data={"sub": sub})
    return client.get(answer.headers["location"].removeprefix("http://testserver"))


def test_a_newcomer_signs_in_gets_an_account_and_an_invitation_not_a_membership(client, provider, acme, alice):
    page = client.get("/login/").content.decode()
    assert "Sign in with Example ID" in page
    erin_claims = {"email": "erin@example.com", "email_verified": True, "preferred_username": "erin", "groups": ["ml"]}
    done = sso_login(client, provider, "erin@example.com", erin_claims)
    assert done.status_code == 302 and done["Location"] == "/"
    erin = get_user_model().objects.get(email="erin@example.com")
    assert erin.username == "erin" and not erin.has_usable_password()
    assert not Membership.objects.filter(user=erin).exists(), "nobody joins a team without accepting"
    invitation = Invitation.objects.get(team=acme, username="erin")
    assert invitation.role == "editor" and invitation.accepted_at is None
    assert "Acme" in client.get("/").content.decode()  # the no-team page offers the invitation
    sso_login(client.__class__(), provider, "erin@example.com", erin_claims)
    assert Invitation.objects.filter(team=acme, username="erin").count() == 1, "a second login invites once"
    assert get_user_model().objects.filter(email="erin@example.com").count() == 1, "the same subject, one account"


def test_a_members_groups_set_their_role_and_the_audit_log_records_it(client, provider, acme, alice):
    sso_login(client, provider, "dana-at-idp", {"preferred_username": "dana"})
    dana = get_user_model().objects.get(sso_identity__subject="dana-at-idp")
    membership_add(team=acme, user=dana, role="viewer")  # she accepted an invitation meanwhile
    done = sso_login(client.__class__(), provider, "dana-at-idp", {"preferred_username": "dana",
                                                                   "groups": ["ml", "ml-leads"]})
    assert done.status_code == 302
    assert Membership.objects.get(team=acme, user=dana).role == "owner"  # the highest role its groups map to
    verbs = list(AuditEvent.objects.filter(team_id=acme.pk).values_list("verb", flat=True))
    assert "membership.role" in verbs and "sso.login" in verbs


def test_a_local_account_is_never_taken_over_through_its_e_mail_address(client, provider, alice):
    """Whoever controls an identity provider account with alice's address gets an account of their own."""
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    sso_login(client, provider, "mallory", {"email": "alice@example.com", "email_verified": True,
                                            "preferred_username": "alice"})
    signed_in = client.get("/").wsgi_request.user
    assert signed_in.is_authenticated and signed_in != alice and signed_in.username == "alice2"


def test_an_address_the_provider_does_not_vouch_for_is_not_kept(client, provider, acme, alice):
    """Invitations by e-mail reach the account holding the address."""
    sso_login(client, provider, "frank", {"email": "frank@example.com", "email_verified": False,
                                          "preferred_username": "frank"})
    assert get_user_model().objects.get(username="frank").email == ""


def test_local_passwords_keep_working_beside_single_sign_on(client, provider, alice):
    assert client.post("/login/", {"username": "alice", "password": PASSWORD})["Location"] == "/"


def test_without_configuration_there_is_no_single_sign_on(client):
    assert client.get("/sso/start/").status_code == 404
    assert client.get("/sso/callback/").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()
