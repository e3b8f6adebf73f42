"""The audit log: each change of membership, role, invitation, API token and webhook, each cancel
and each model download is recorded with who, when, which team and object and from which address,
in the same transaction as the change (one that rolls back leaves no row); owners see it on the
team page and in GET /api/v1/audit/, filtered by person, action and date; others do not; rows
older than TUNEBOARD_AUDIT_DAYS are purged."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experiments.models import ApiToken, AuditEvent, Membership, TrainedModel, Webhook
from experiments.services.audit import audit_purge
from experiments.services.memberships import membership_set_role
from experiments.services.studies import study_start
from experiments.services.teams import TeamError
from tests.api.conftest import token_client
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db
ADDRESS = "203.0.113.7"


@pytest.fixture
def owner(client, alice):
    client.force_login(alice)
    client.defaults["REMOTE_ADDR"] = ADDRESS
    return client


def verbs(team) -> list[str]:
    return list(AuditEvent.objects.filter(team=team).order_by("id").values_list("verb", flat=True))


def last(team) -> AuditEvent:
    return AuditEvent.objects.filter(team=team).order_by("-id").first()


def test_an_invitation_its_acceptance_and_role_changes_are_recorded_with_who_and_where(owner, acme, alice,
                                                                                     django_user_model):
    dora = django_user_model.objects.create_user("dora", email="dora@example.com", password="x" * 12)
    owner.post(reverse("team_member_add"), {"identifier": "dora", "role": "viewer"})
    event = last(acme)
    assert (event.verb, event.actor, event.remote_addr, event.object_repr) == (
        "invitation.create", alice, ADDRESS, "dora to Acme (viewer)")

    dora_client = Client(REMOTE_ADDR="198.51.100.9")
    dora_client.force_login(dora)
    invitation = dora.username and acme.invitations.get()
    dora_client.post(reverse("invitation_accept_mine", args=[invitation.id]))
    assert verbs(acme)[-2:] == ["invitation.accept", "membership.add"]
    accepted = AuditEvent.objects.get(team=acme, verb="membership.add", object_repr__startswith="dora")
    assert (accepted.actor, accepted.remote_addr) == (dora, "198.51.100.9")

    membership = Membership.objects.get(team=acme, user=dora)
    owner.post(reverse("team_member_role", args=[membership.id]), {"role": "editor"})
    role = last(acme)
    assert role.verb == "membership.role" and role.changes["role"] == ["viewer", "editor"] and role.actor == alice

    owner.post(reverse("team_member_remove", args=[membership.id]))
    assert last(acme).verb == "membership.remove"


def test_a_declined_and_a_withdrawn_invitation_are_recorded(owner, acme, django_user_model):
    dora = django_user_model.objects.create_user("dora", password="x" * 12)
    owner.post(reverse("team_member_add"), {"identifier": "dora", "role": "viewer"})
    dora_client = Client()
    dora_client.force_login(dora)
    dora_client.post(reverse("invitation_decline", args=[acme.invitations.get().id]))
    assert last(acme).verb == "invitation.decline" and last(acme).actor == dora
    owner.post(reverse("team_member_add"), {"identifier": "eve@example.com", "role": "viewer"})
    owner.post(reverse("team_invitation_withdraw", args=[acme.invitations.get(email="eve@example.com").id]))
    assert last(acme).verb == "invitation.withdraw"


def test_tokens_made_and_revoked_are_recorded_without_the_token(owner, acme, alice):
    owner.post(reverse("api_tokens"), {"name": "laptop", "team": acme.id, "role": "viewer"})
    made = last(acme)
    token = ApiToken.objects.get()
    assert made.verb == "token.create" and made.actor == alice
    assert token.digest not in str(made.changes) and "digest" not in made.changes
    owner.post(reverse("api_tokens"), {"revoke": token.token_key})
    assert last(acme).verb == "token.delete"


def test_webhook_changes_are_recorded_and_the_secret_never(owner, acme):
    AuditEvent.objects.all().delete()  # the personas' memberships
    owner.post(reverse("webhook_new"), {"name": "ops", "url": "https://hooks.example.com/T0/secret-path",
                                        "events": ["study.completed"], "active": "on", "secret": "s" * 24})
    webhook = Webhook.objects.get()
    owner.post(reverse("webhook_secret", args=[webhook.id]))
    owner.post(reverse("webhook_remove", args=[webhook.id]))
    assert verbs(acme) == ["webhook.create", "webhook.update", "webhook.delete"]
    stored = " ".join(str(e.changes) for e in AuditEvent.objects.all())
    assert "s" * 24 not in stored and webhook.secret not in stored and "secret-path" not in stored
    assert "https://hooks.example.com/…" in stored


def test_a_cancel_and_model_downloads_through_page_and_api_are_recorded(owner, acme, alice, acme_study, acme_model):
    study_start(study=acme_study)
    owner.post(reverse("study_cancel", args=[acme_study.id]))
    assert last(acme).verb == "study.cancel" and last(acme).actor == alice
    queued = TrainedModel.objects.create(team=acme, dataset=acme_study.dataset, study=acme_study, name="q", version=1,
                                         method="retrain", seed=1, status=TrainedModel.Status.QUEUED)
    owner.post(reverse("model_cancel", args=[queued.id]))
    assert (last(acme).verb, last(acme).object_pk, last(acme).remote_addr) == ("model.cancel", str(queued.pk), ADDRESS)
    owner.get(reverse("model_download", args=[acme_model.id, "keras"]))
    token_client(alice).get(f"/api/v1/models/{acme_model.id}/download/keras/")
    downloads = AuditEvent.objects.filter(team=acme, verb="model.download")
    assert downloads.count() == 2 and all(e.actor == alice for e in downloads)
    assert downloads.first().changes == {"format": "keras"}


def test_a_change_that_rolls_back_leaves_no_row(acme, alice):
    membership = Membership.objects.get(team=acme, user=alice)
    before = AuditEvent.objects.count()
    with pytest.raises(TeamError):  # the last owner: refused inside its transaction
        membership_set_role(membership=membership, role="viewer")
    with pytest.raises(RuntimeError), transaction.atomic():
        Webhook.objects.create(team=acme, name="x", url="https://hooks.example.com/x", secret="s" * 20,
                               events=["study.completed"])
        raise RuntimeError("the change fails after its save")
    assert AuditEvent.objects.count() == before


def test_only_owners_see_the_log_on_the_page_and_in_the_api(owner, acme, alice, bob):
    owner.post(reverse("team_member_add"), {"identifier": "x@example.com", "role": "viewer"})
    assert "Audit log" in page_text(owner.get(reverse("team_settings")))
    assert token_client(alice).get("/api/v1/audit/").json()["count"] >= 1
    viewer = Client()
    viewer.force_login(bob)
    assert 'id="audit"' not in page_text(viewer.get(reverse("team_settings")))
    response = token_client(bob).get("/api/v1/audit/")
    assert response.status_code == 403 and response.json()["detail"] == "Only the team's owners can see this."


def test_another_teams_owner_sees_none_of_it(owner, acme, charlie):
    owner.post(reverse("team_member_add"), {"identifier": "x@example.com", "role": "viewer"})
    rows = token_client(charlie).get("/api/v1/audit/").json()["results"]
    assert rows and all("Acme" not in r["object"] and "x@example.com" not in r["object"] for r in rows)


def test_the_log_filters_by_person_action_and_date(owner, acme, alice, bob):
    AuditEvent.objects.all().delete()  # the personas' memberships
    owner.post(reverse("team_member_add"), {"identifier": "x@example.com", "role": "viewer"})
    owner.post(reverse("team_member_role", args=[Membership.objects.get(user=bob).id]), {"role": "editor"})
    api = token_client(alice)
    assert {r["action"] for r in api.get("/api/v1/audit/?action=membership.role").json()["results"]} == {
        "membership.role"}
    mine = api.get(f"/api/v1/audit/?actor={alice.id}").json()["results"]
    assert [r["action"] for r in mine] == ["membership.role", "invitation.create"], mine
    today = timezone.now().date()
    assert api.get(f"/api/v1/audit/?since={today}&until={today}").json()["count"] == 3  # and the token
    assert api.get(f"/api/v1/audit/?until={today - timedelta(days=1)}").json()["count"] == 0
    bad = api.get(f"/api/v1/audit/?since={today}&until={today - timedelta(days=3)}")
    assert bad.status_code == 400 and bad.json()["detail"] == "The start date is after the end date."
    assert api.get("/api/v1/audit/?actor=²").status_code == 400
    page = page_text(owner.get(reverse("team_settings") + "?action=membership.role"))
    assert "Role changed" in page and "Invitation made" not in page.split('id="audit-events"')[1]


def test_rows_older_than_the_setting_are_purged(acme, alice, settings):
    settings.AUDIT_DAYS = 30
    Membership.objects.create(team=acme, user=alice.__class__.objects.create_user("z", password="x" * 12))
    AuditEvent.objects.update(timestamp=timezone.now() - timedelta(days=31))
    kept = Membership.objects.create(team=acme, user=alice.__class__.objects.create_user("y", password="x" * 12))
    assert audit_purge() >= 1
    assert list(AuditEvent.objects.values_list("object_pk", flat=True)) == [str(kept.pk)]
