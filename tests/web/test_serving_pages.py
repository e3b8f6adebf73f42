"""The serving panel: the team's TF Serving folder and last export, "Export now" for editors,
nothing of another team's, and the include the registry pages use."""

import pytest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from experiments.models import ServingExport
from tests.fixtures.registry_rows import register, savedmodel_zip_bytes, trained_model
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(acme, acme_dataset, settings, tmp_path):
    """An export that completed, with a version it left out."""
    settings.SERVING_DIR = tmp_path
    register(acme, "digits", [trained_model(acme, acme_dataset, "m1", savedmodel=savedmodel_zip_bytes("m1"))],
             {"production": 1})
    return ServingExport.objects.create(
        team=acme, reason="alias:digits@production", status=ServingExport.Status.COMPLETED, duration_seconds=0.2,
        finished=timezone.now(),
        report={"written": ["digits/1"], "kept": [], "removed": ["old/3"], "labels": {"digits": {"production": 1}},
                "skipped": [{"version": "digits/2", "reason": "Its trained model has no SavedModel file."}],
                "config_changed": True, "seconds": 0.2, "folder": str(tmp_path / f"team-{acme.pk}")})


def test_the_page_shows_the_teams_folder_and_what_the_last_export_did(alice_client, acme, exported, tmp_path):
    text = page_text(alice_client.get(reverse("registry_serving")))
    assert f"team-{acme.pk}" in text and str(tmp_path / f"team-{acme.pk}") in text
    for line in ("Written: digits/1", "Removed: old/3", "Labels of digits: production → 1",
                 "Left out digits/2: Its trained model has no SavedModel file.", "Export now"):
        assert line in text


def test_export_now_queues_an_export_and_goes_back_to_the_page_it_was_on(alice_client, acme, alice):
    response = alice_client.post(reverse("registry_serving_export"), {"next": "/registry/7/"})
    assert response.status_code == 302 and response["Location"] == "/registry/7/"
    export = ServingExport.objects.get(team=acme)
    assert (export.status, export.reason, export.created_by) == (ServingExport.Status.QUEUED, "manual", alice)
    # Another click while it waits: the same export. A foreign address is not followed.
    response = alice_client.post(reverse("registry_serving_export"), {"next": "https://evil.example.com/"})
    assert response["Location"] == reverse("registry_serving")
    assert ServingExport.objects.filter(team=acme).count() == 1
    assert "queued" in page_text(alice_client.get(reverse("registry_serving")))


def test_viewers_see_the_panel_without_the_button_and_cannot_export(client, bob, acme, exported):
    client.force_login(bob)
    assert "Export now" not in page_text(client.get(reverse("registry_serving")))
    assert client.post(reverse("registry_serving_export")).status_code == 403
    assert ServingExport.objects.filter(team=acme).count() == 1


def test_another_team_sees_its_own_folder_and_nothing_of_acmes(client, charlie, globex, acme, exported):
    client.force_login(charlie)
    text = page_text(client.get(reverse("registry_serving")))
    assert f"team-{globex.pk}" in text and f"team-{acme.pk}" not in text
    assert "digits" not in text and "Not exported yet." in text
    client.post(reverse("registry_serving_export"))
    assert ServingExport.objects.filter(team=globex).count() == 1
    assert ServingExport.objects.filter(team=acme).count() == 1


def test_the_include_renders_the_panel_on_any_page_of_the_registry(alice_client, acme, exported):
    request = alice_client.get(reverse("registry_serving")).wsgi_request
    html = render_to_string("registry/_serving.html", {"csrf_token": "t"}, request=request)
    assert 'id="serving-export-button"' in html and f"team-{acme.pk}" in html


def test_the_panel_says_why_the_export_ran_and_the_registry_links_to_it(alice_client, acme, exported):
    text = page_text(alice_client.get(reverse("registry_serving")))
    assert "after digits@production moved" in text and "alias:digits" not in text
    assert "/v1/models/&lt;name&gt;/labels/production:predict" in text
    registered = exported.team.registered_models.get(name="digits")
    detail = page_text(alice_client.get(reverse("registry_detail", args=[registered.id])))
    assert "/v1/models/digits/labels/production:predict" in detail
    listing = alice_client.get(reverse("registry_list")).content.decode()
    assert f'href="{reverse("registry_serving")}"' in listing
    assert f'href="{reverse("registry_list")}"' in alice_client.get(reverse("registry_serving")).content.decode()


def test_each_reason_reads_in_words():
    from experiments.presentation.serving_reports import serving_reason_label

    assert serving_reason_label("alias:iris@staging") == "after iris@staging moved"
    assert serving_reason_label("manual") == "asked for on the page"
    assert serving_reason_label("api") == "asked for through the API"
    assert serving_reason_label("command") == "run by manage.py export_serving"
