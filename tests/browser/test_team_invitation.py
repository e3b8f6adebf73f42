"""A fresh deployment in a real Chromium: the first owner, made by `createteam`, logs in and
invites a colleague by e-mail as a viewer; the colleague opens the link, signs up, lands on
the team, sees its studies and cannot change anything. No worker is needed."""

import io

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.management import call_command
from django.urls import reverse

from experiments.models import Membership, Study, Team
from experiments.services.datasets import dataset_create_bundled
from tests.browser.conftest import log_in
from tests.integration.helpers import saved_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

OWNER_PASSWORD = "ada's long password"
VIEWER_PASSWORD = "bea's own passphrase"

# Posts to the study's start action with the page's CSRF token, as a tampered form would.
POST_START = """async (url) => {
  const token = document.querySelector('input[name=csrfmiddlewaretoken]').value;
  const response = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}});
  return response.status;
}"""


def test_an_owner_invites_a_viewer_who_signs_up_and_can_only_look(live_server, browser, page, screenshot):
    call_command("createteam", "Research", "--owner", "ada", "--create-user", "--email", "ada@example.com",
                 "--password", OWNER_PASSWORD, stdout=io.StringIO())
    ada, team = get_user_model().objects.get(username="ada"), Team.objects.get(name="Research")
    study = saved_study(team, ada, dataset_create_bundled(team=team, user=ada, bundled_name="iris"),
                        name="iris search", hypermodel="dense")

    # The owner invites bea by e-mail as a viewer and copies the link shown once.
    log_in(page, live_server, "ada", OWNER_PASSWORD)
    page.get_by_role("link", name="Team", exact=True).click()
    page.get_by_label("E-mail address or username").fill("bea@example.com")
    page.get_by_label("Role", exact=True).select_option("viewer")
    page.get_by_role("button", name="Invite", exact=True).click()
    link = page.get_by_role("textbox", name="Invitation link").input_value()
    assert link.startswith(f"{live_server.url}/invitations/")
    assert "bea@example.com" in page.locator("#invitations").inner_text()
    screenshot("owner-invited")
    assert len(mail.outbox) == 1 and link in mail.outbox[0].body

    # Bea, in a browser of her own, opens the link and signs up.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        bea = context.new_page()
        bea.set_default_timeout(15_000)
        bea.goto(link)
        assert "Join Research" in bea.content()
        bea.get_by_label("Username").fill("bea")
        bea.get_by_label("Password", exact=True).fill(VIEWER_PASSWORD)
        bea.get_by_label("Password confirmation").fill(VIEWER_PASSWORD)
        bea.get_by_role("button", name="Sign up and join").click()
        bea.wait_for_url(f"{live_server.url}/")
        assert "Welcome to Research: you joined as viewer." in bea.locator("main").inner_text()
        assert bea.locator("#team-select option:checked").inner_text() == "Research (viewer)"

        # She sees the team's studies but is offered nothing to change, and a forged post is refused.
        bea.get_by_role("link", name="Studies", exact=True).click()
        assert "iris search" in bea.locator("main").inner_text()
        assert bea.get_by_role("link", name="New study").count() == 0
        status = bea.evaluate(POST_START, reverse("study_start", args=[study.id]))
        assert status == 403
    finally:
        context.close()

    study.refresh_from_db()
    assert study.status == Study.Status.CREATED
    bea_membership = Membership.objects.get(user__username="bea")
    assert (bea_membership.team, bea_membership.role) == (team, Membership.Role.VIEWER)
