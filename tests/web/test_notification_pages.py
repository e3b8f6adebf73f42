"""Notification pages: each user picks, team by team, the events e-mailed to them (none until
they choose); owners and editors manage the team's webhooks (bad input refused with a message
and nothing saved, the secret shown once); viewers only look; another team's webhooks are
404; the team page lists recent deliveries with their status, tries and last error."""

import pytest
from django.test import Client
from django.urls import reverse

from experiments.models import EventKind, Membership, NotificationDelivery, NotificationPreference, Webhook
from experiments.services.memberships import membership_add
from experiments.services.notifications import notify_webhook_test
from experiments.services.webhooks import webhook_create
from tests.web.pages import page_text, shows
from tests.web.test_accessibility import _Fields

pytestmark = pytest.mark.django_db
GOOD = {"name": "ml-alerts", "url": "https://hooks.slack.com/services/T000/B000/XXXX",
        "events": [EventKind.STUDY_COMPLETED, EventKind.STUDY_FAILED], "active": "on"}
ACTIONS = ["webhook_test", "webhook_secret", "webhook_remove"]


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def dora(acme, django_user_model):
    """An editor of acme."""
    user = django_user_model.objects.create_user(username="dora", email="dora@example.com", password="x" * 12)
    membership_add(team=acme, user=user, role=Membership.Role.EDITOR)
    return user


@pytest.fixture
def hook(acme, alice) -> Webhook:
    webhook, _ = webhook_create(team=acme, user=alice, name="ops", url="https://ops.example.com/secret-path/abc",
                                events=[EventKind.WORKER_LOST], secret="the-original-secret")
    return webhook


# --- e-mail preferences ----------------------------------------------------------------


def test_the_account_menu_links_to_the_notification_settings(alice_client):
    assert f'href="{reverse("notification_settings")}"' in page_text(alice_client.get(reverse("dashboard")))


def test_nothing_is_chosen_until_the_user_chooses(alice_client, acme, alice):
    response = alice_client.get(reverse("notification_settings"))
    assert response.status_code == 200
    assert shows(response, "Nothing is sent until you choose.") and "Acme" in page_text(response)
    assert " checked" not in page_text(response)
    assert shows(response, "Your account has no e-mail address")


def test_a_user_saves_events_per_team_and_sees_them_again(alice_client, acme, globex, alice):
    membership_add(team=globex, user=alice, role=Membership.Role.VIEWER)
    response = alice_client.post(reverse("notification_settings"), {
        f"events-{acme.id}": [EventKind.STUDY_COMPLETED, EventKind.MODEL_READY], f"only_mine-{acme.id}": "on",
        f"events-{globex.id}": [EventKind.WORKER_LOST]}, follow=True)
    assert shows(response, "Your e-mail notifications are saved.")
    saved = {p.team_id: (p.events, p.only_mine) for p in NotificationPreference.objects.filter(user=alice)}
    assert saved == {acme.id: (["study.completed", "model.ready"], True), globex.id: (["worker.lost"], False)}
    assert page_text(response).count(" checked") == 4
    # Unticking everything is saved too.
    alice_client.post(reverse("notification_settings"), {})
    assert all(p.events == [] for p in NotificationPreference.objects.filter(user=alice))


def test_an_unknown_event_is_refused_and_nothing_is_saved(alice_client, acme, alice):
    response = alice_client.post(reverse("notification_settings"),
                                 {f"events-{acme.id}": [EventKind.STUDY_COMPLETED, "world.ended"]})
    assert response.status_code == 200
    assert shows(response, "Unknown event 'world.ended'")
    assert not NotificationPreference.objects.exists()


def test_another_teams_id_in_the_form_changes_nothing_there(alice_client, acme, globex, alice):
    alice_client.post(reverse("notification_settings"), {f"events-{globex.id}": [EventKind.STUDY_COMPLETED]})
    assert not NotificationPreference.objects.filter(team=globex).exists()


def test_the_settings_page_needs_a_login(client):
    response = client.get(reverse("notification_settings"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


# --- webhooks ---------------------------------------------------------------------------


def test_an_owner_adds_a_webhook_and_sees_its_secret_once(alice_client, acme):
    response = alice_client.post(reverse("webhook_new"), GOOD, follow=True)
    assert shows(response, "Webhook ml-alerts saved. Copy its secret now: it is shown only once.")
    webhook = Webhook.objects.get(team=acme)
    assert (webhook.url, webhook.events, webhook.active) == (GOOD["url"], GOOD["events"], True)
    assert len(webhook.secret) >= 40 and webhook.secret in page_text(response)
    again = alice_client.get(reverse("team_settings"))
    assert webhook.secret not in page_text(again)
    assert "https://hooks.slack.com/…" in page_text(again) and "T000/B000" not in page_text(again)


def test_an_editor_sets_their_own_secret(client, dora, acme):
    response = client_for(dora).post(reverse("webhook_new"), {**GOOD, "secret": "my-own-secret-of-20"}, follow=True)
    assert response.status_code == 200
    assert Webhook.objects.get(team=acme).secret == "my-own-secret-of-20"


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://files.example.com/hook", "Webhooks are called over http:// or https:// only, not 'ftp'."),
    ("javascript:alert(1)", "Webhooks are called over http:// or https:// only, not 'javascript'."),
    ("file:///etc/passwd", "Webhooks are called over http:// or https:// only, not 'file'."),
    ("https://exa mple.com/hook", "'https://exa mple.com/hook' is not a valid http(s) URL."),
    ("http://", "'http://' is not a valid http(s) URL."),
    ("", "This field is required."),
])
def test_a_bad_url_is_refused_with_a_message_and_nothing_is_saved(alice_client, url, message):
    response = alice_client.post(reverse("webhook_new"), {**GOOD, "url": url})
    assert response.status_code == 200
    assert shows(response, message)
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"events": []}, "Choose at least one event to send."),
    ({"events": ["study.completed", "test"]}, "Select a valid choice. test is not one of the available choices."),
    ({"secret": "short"}, "A secret needs 16 to 128 characters"),
    ({"name": "   "}, "This field is required."),
])
def test_other_bad_input_is_refused_with_a_message_and_nothing_is_saved(alice_client, change, message):
    response = alice_client.post(reverse("webhook_new"), {**GOOD, **change})
    assert response.status_code == 200
    assert shows(response, message)
    assert not Webhook.objects.exists()


def test_editing_keeps_the_secret_unless_a_new_one_is_given(alice_client, hook):
    response = alice_client.get(reverse("webhook_edit", args=[hook.id]))
    assert hook.url in page_text(response) and hook.secret not in page_text(response)
    alice_client.post(reverse("webhook_edit", args=[hook.id]), {**GOOD, "name": "renamed"})
    hook.refresh_from_db()
    assert (hook.name, hook.active, hook.secret) == ("renamed", True, "the-original-secret")
    alice_client.post(reverse("webhook_edit", args=[hook.id]), {**GOOD, "active": "", "secret": "x" * 20})
    hook.refresh_from_db()
    assert (hook.active, hook.secret) == (False, "x" * 20)


def test_a_bad_edit_changes_nothing(alice_client, hook):
    response = alice_client.post(reverse("webhook_edit", args=[hook.id]), {**GOOD, "url": "gopher://x"})
    assert shows(response, "not 'gopher'")
    hook.refresh_from_db()
    assert hook.url == "https://ops.example.com/secret-path/abc" and hook.name == "ops"


def test_a_new_secret_replaces_the_old_and_is_shown_once(alice_client, hook):
    response = alice_client.post(reverse("webhook_secret", args=[hook.id]), follow=True)
    hook.refresh_from_db()
    assert hook.secret != "the-original-secret" and hook.secret in page_text(response)


def test_send_test_queues_a_delivery_listed_on_the_team_page(alice_client, hook):
    response = alice_client.post(reverse("webhook_test", args=[hook.id]), follow=True)
    assert shows(response, "A test event is on its way to ops; its delivery is listed below.")
    delivery = NotificationDelivery.objects.get(webhook=hook)
    assert delivery.status == "pending" and delivery.event.kind == "test"
    assert f'id="delivery-{delivery.id}"' in page_text(response)


def test_a_test_of_a_webhook_turned_off_is_refused_with_a_message(alice_client, hook):
    Webhook.objects.filter(pk=hook.pk).update(active=False)
    response = alice_client.post(reverse("webhook_test", args=[hook.id]), follow=True)
    assert shows(response, "The webhook ops is turned off; turn it on to send a test.")
    assert not NotificationDelivery.objects.exists()


def test_the_team_page_shows_a_failed_delivery_with_its_tries_and_error(bob, hook, alice, settings):
    notify_webhook_test(webhook=hook, user=alice)
    NotificationDelivery.objects.update(status="failed", attempts=6, response_code=503,
                                        last_error="HTTP 503 Service Unavailable: try later")
    html = page_text(client_for(bob).get(reverse("team_settings")))  # a viewer sees deliveries too
    assert "HTTP 503 Service Unavailable: try later" in html and f"6 of {settings.NOTIFY_MAX_ATTEMPTS}" in html
    assert 'class="badge status-failed">Failed' in html


def test_removing_a_webhook_removes_its_deliveries(alice_client, hook, alice):
    notify_webhook_test(webhook=hook, user=alice)
    response = alice_client.post(reverse("webhook_remove", args=[hook.id]), follow=True)
    assert shows(response, "Webhook ops was removed with its deliveries.")
    assert not Webhook.objects.exists() and not NotificationDelivery.objects.exists()


def test_a_viewer_sees_webhooks_but_cannot_manage_them(bob, hook):
    bob_client = client_for(bob)
    html = page_text(bob_client.get(reverse("team_settings")))
    assert "ops" in html and "https://ops.example.com/…" in html and "secret-path" not in html
    assert reverse("webhook_new") not in html and reverse("webhook_test", args=[hook.id]) not in html
    assert bob_client.get(reverse("webhook_new")).status_code == 403
    assert bob_client.post(reverse("webhook_new"), GOOD).status_code == 403
    assert bob_client.get(reverse("webhook_edit", args=[hook.id])).status_code == 403
    for name in ACTIONS:
        assert bob_client.post(reverse(name, args=[hook.id])).status_code == 403
    hook.refresh_from_db()
    assert hook.secret == "the-original-secret" and Webhook.objects.count() == 1
    assert not NotificationDelivery.objects.exists()


def test_another_team_gets_404_for_acme_webhooks_and_nothing_changes(charlie, hook):
    charlie_client = client_for(charlie)
    assert charlie_client.get(reverse("webhook_edit", args=[hook.id])).status_code == 404
    assert charlie_client.post(reverse("webhook_edit", args=[hook.id]), GOOD).status_code == 404
    for name in ACTIONS:
        assert charlie_client.post(reverse(name, args=[hook.id])).status_code == 404
    hook.refresh_from_db()
    assert (hook.name, hook.secret) == ("ops", "the-original-secret")
    assert not NotificationDelivery.objects.exists()
    assert "ops.example.com" not in page_text(charlie_client.get(reverse("team_settings")))


def test_notification_pages_label_every_field(alice_client, alice, hook):
    notify_webhook_test(webhook=hook, user=alice)
    for url in (reverse("notification_settings"), reverse("webhook_new"), reverse("webhook_edit", args=[hook.id]),
                reverse("team_settings")):
        parser = _Fields()
        parser.feed(page_text(alice_client.get(url)))
        assert parser.unlabelled() == [], url
        assert parser.header_cells >= parser.tables, url


# --- API ------------------------------------------------------------------------------------


def test_the_api_lists_the_teams_webhooks_without_secrets_and_its_deliveries(alice, charlie, hook):
    from tests.api.conftest import token_client

    notify_webhook_test(webhook=hook, user=alice)
    api = token_client(alice)
    webhooks = api.get("/api/v1/webhooks/").json()
    assert [w["name"] for w in webhooks["results"]] == ["ops"]
    assert "secret" not in webhooks["results"][0] and webhooks["results"][0]["address"] == "https://ops.example.com/…"
    deliveries = api.get("/api/v1/deliveries/?status=pending&channel=webhook").json()["results"]
    assert [(d["event"], d["status"], d["attempts"], d["webhook"]) for d in deliveries] == [
        ("test", "pending", 0, hook.id)]
    assert api.get("/api/v1/deliveries/?status=sent").json()["results"] == []
    assert api.get("/api/v1/deliveries/?status=lost").status_code == 400
    other = token_client(charlie)
    assert other.get("/api/v1/webhooks/").json()["results"] == []
    assert other.get("/api/v1/deliveries/").json()["results"] == []
