"""Single sign-on against a local OpenID provider (oidc-provider-mock, in this process): the
authorization-code flow through mozilla-django-oidc, accounts found or made by e-mail, identity
provider groups mapped to team roles (a newcomer is invited, never joined without accepting), the
logins and role changes in the audit log, and local passwords still working."""

from urllib.parse import quote

import httpx
import oidc_provider_mock
import pytest

from experiments.models import AuditEvent, Invitation, Membership
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
    done = sso_login(client, provider, "erin@example.com",
                     {"email": "erin@example.com", "preferred_username": "erin", "groups": ["ml"]})
    assert done.status_code == 302 and done["Location"] == "/"
    erin = Membership._meta.get_field("user").related_model.objects.get(email="erin@example.com")
    assert erin.username == "erin" and not erin.has_usable_password()
    assert not Membership.objects.filter(user=erin).exists(), "nobody joins a team without accepting"
    invitation = Invitation.objects.get(team=acme, username="erin")
    assert invitation.role == "editor" and invitation.accepted_at is None
    assert "Acme" in client.get("/").content.decode()  # the no-team page offers the invitation
    sso_login(client.__class__(), provider, "erin@example.com",
              {"email": "erin@example.com", "preferred_username": "erin", "groups": ["ml"]})
    assert Invitation.objects.filter(team=acme, username="erin").count() == 1, "a second login invites once"


def test_a_members_groups_set_their_role_and_the_audit_log_records_it(client, provider, acme, alice, bob):
    bob.email = "bob@example.com"
    bob.save(update_fields=["email"])
    done = sso_login(client, provider, "bob-at-idp", {"email": "BOB@example.com", "groups": ["ml", "ml-leads"]})
    assert done.status_code == 302
    assert Membership.objects.get(team=acme, user=bob).role == "owner"  # the highest role its groups map to
    assert client.get("/").wsgi_request.user == bob
    verbs = list(AuditEvent.objects.filter(team_id=acme.pk).values_list("verb", flat=True))
    assert "membership.role" in verbs and "sso.login" in verbs


def test_claims_without_an_email_sign_nobody_in(client, provider):
    users = Membership._meta.get_field("user").related_model.objects
    before = users.count()
    done = sso_login(client, provider, "nomail", {"preferred_username": "ghost"})
    assert done.status_code == 302 and users.count() == before
    assert not client.get("/").wsgi_request.user.is_authenticated


def test_local_passwords_keep_working_beside_single_sign_on(client, provider, alice):
    assert client.post("/login/", {"username": "alice", "password": PASSWORD})["Location"] == "/"


def test_without_configuration_there_is_no_single_sign_on(client):
    assert client.get("/sso/start/").status_code == 404
    assert client.get("/sso/callback/").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()
