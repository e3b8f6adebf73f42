"""Another team's objects are invisible: every page that takes an object id answers 404 to
users of other teams and changes nothing; anonymous users are sent to the login page."""

import pytest
from django.urls import reverse

from experiments import urls as experiment_urls
from experiments.models import (
    Dataset,
    Invitation,
    Membership,
    RegisteredModel,
    Study,
    TrainedModel,
    Trial,
    TrialRerun,
    Webhook,
)
from experiments.services.datasets import dataset_create_bundled
from experiments.services.invitations import invitation_create
from experiments.services.memberships import membership_add
from experiments.services.registry import registry_register
from experiments.services.studies import study_start
from experiments.services.webhooks import webhook_create
from tests.integration.helpers import saved_study
from tests.web.pages import page_text
from tests.web.registry_rows import signature

pytestmark = pytest.mark.django_db

PAGES = ["dataset_detail", "study_detail", "study_live", "trial_detail", "model_detail", "model_live",
         "model_download", "model_card", "study_chart_data", "study_trials_csv", "study_compare", "study_clone",
         "trial_reruns_live", "registry_detail", "trial_logs_live", "trial_logs_download", "model_logs_live",
         "model_logs_download"]
# Each action with the form data a real page posts and the study state it is tried on.
ACTIONS = {
    "study_start": ({}, Study.Status.CREATED),
    "study_cancel": ({}, Study.Status.RUNNING),
    "study_budget": ({"max_trials": 50, "parallelism": 4}, Study.Status.RUNNING),
    "study_extend": ({"max_trials": 50, "epochs": 5, "tuner": "random"}, Study.Status.CANCELLED),
    "study_models_request": ({"top_n": 1, "method": "retrain", "epoch_source": "detect", "epoch_cap": 5},
                             Study.Status.CREATED),
    "trial_models_request": ({"method": "promote", "epoch_source": "detect", "epoch_cap": 5}, Study.Status.CREATED),
    "trial_annotate": ({"notes": "seen by charlie", "tags": "leak"}, Study.Status.CREATED),
    "model_cancel": ({}, Study.Status.CREATED),
    "trial_rerun": ({}, Study.Status.CREATED),
    # The registry's: what they leave unchanged is checked in tests/web/test_registry_pages.py.
    "model_register": ({"name": "stolen"}, Study.Status.CREATED),
    "registry_alias_set": ({"alias": "production", "version": 1}, Study.Status.CREATED),
    "registry_alias_remove": ({"alias": "production"}, Study.Status.CREATED),
    "registry_rollback": ({"move": 1}, Study.Status.CREATED),
    "study_tags": ({"tags": "stolen"}, Study.Status.CREATED),
}
# Team management: each with the form data the team page posts.
TEAM_ACTIONS = {
    "team_member_role": {"role": "viewer"},
    "team_member_remove": {},
    "team_invitation_withdraw": {},
}
# Webhooks: cross-team, viewer and bad-input checks in tests/web/test_notification_pages.py.
WEBHOOK_ROUTES = {"webhook_edit", "webhook_test", "webhook_secret", "webhook_remove"}
# Answering an invitation: only the account it is addressed to (checked below).
INVITATION_ROUTES = {"invitation_accept_mine", "invitation_decline"}
# An image dataset's example images: cross-team and bad-id checks in tests/web/test_dataset_examples.py
# (acme's dataset here is a table, which has none).
IMAGE_ROUTES = {"dataset_examples"}
# Batch predictions: cross-team, viewer and bad-input checks in tests/web/test_prediction_pages.py.
PREDICTION_ROUTES = {"model_predict", "model_try", "prediction_detail", "prediction_live", "prediction_cancel",
                     "prediction_download"}
# Ensemble recipes: cross-team (every route), viewer and bad-input checks in tests/web/test_recipe_pages.py.
RECIPE_ROUTES = {"recipe_detail", "recipe_edit", "recipe_clone", "recipe_preview_saved", "recipe_run",
                 "recipe_take_over", "recipe_delete", "recipe_runs_live"}
# A queue is the fleet's, not a team's: its page names no other team's study and only a site admin
# sets shares (tests/web/test_queue_page.py).
QUEUE_ROUTES = {"queue_detail", "queue_policy"}
# Quantized variants: cross-team, viewer and bad-input checks in tests/web/test_variant_pages.py.
VARIANT_ROUTES = {"model_variant_request", "model_variant_download", "model_variant_cancel"}
POST_ONLY = {*ACTIONS, *TEAM_ACTIONS, "switch_team", "team_member_add", "team_leave",
             *(WEBHOOK_ROUTES - {"webhook_edit"}), "model_predict", "model_try", "prediction_cancel",
             "recipe_run", "recipe_take_over", "recipe_delete", "queue_policy", "model_variant_request",
             "model_variant_cancel"}
STUDY_STATE = ["status", "message", "started", "finished", "max_trials", "parallelism"]


def _url(name: str, *, dataset: Dataset, study: Study, trial: Trial, model: TrainedModel,
         membership: Membership, invitation: Invitation, webhook: Webhook, registered: RegisteredModel) -> str:
    ids = {"dataset_id": dataset.id, "study_id": study.id, "trial_pk": trial.pk, "model_id": model.id, "fmt": "keras",
           "class_index": 0, "registered_model_id": registered.id,
           "membership_id": membership.id, "invitation_id": invitation.id, "webhook_id": webhook.id,
           # Anonymous users only (the login redirect comes before any lookup); the 404s for other
           # teams are checked in tests/web/test_prediction_pages.py and test_recipe_pages.py.
           "prediction_id": 0, "recipe_id": 0, "queue": "cpu", "variant_id": 0}
    pattern = next(p for p in experiment_urls.urlpatterns if p.name == name)
    url = reverse(name, kwargs={key: ids[key] for key in pattern.pattern.converters})
    return url + f"?trials={trial.pk}&trials={trial.pk}" if name == "study_compare" else url


@pytest.fixture
def acme_objects(acme, alice, acme_dataset, acme_study, acme_trial, acme_model) -> dict:
    invitation, _ = invitation_create(team=acme, email="newcomer@example.com", role="viewer", created_by=alice)
    webhook, _ = webhook_create(team=acme, user=alice, name="ops", url="https://ops.example.com/hook",
                                events=["study.completed"])
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature=signature())
    acme_model.refresh_from_db()
    registered = registry_register(team=acme, model=acme_model, name="acme", user=alice).registered_model
    return {"dataset": acme_dataset, "study": acme_study, "trial": acme_trial, "model": acme_model,
            "membership": Membership.objects.get(team=acme, user=alice), "invitation": invitation,
            "webhook": webhook, "registered": registered}


@pytest.fixture
def charlie_client(client, charlie):
    client.force_login(charlie)
    return client


def _globex_study(globex, charlie) -> Study:
    dataset = dataset_create_bundled(team=globex, user=charlie, bundled_name="iris")
    return saved_study(globex, charlie, dataset, name="globex study", hypermodel="dense")


def test_every_route_that_takes_an_object_id_is_covered_here():
    with_ids = {
        pattern.name for pattern in experiment_urls.urlpatterns if pattern.pattern.converters
    }
    assert with_ids == (set(PAGES) | set(ACTIONS) | set(TEAM_ACTIONS) | WEBHOOK_ROUTES | INVITATION_ROUTES
                        | IMAGE_ROUTES | PREDICTION_ROUTES | RECIPE_ROUTES | QUEUE_ROUTES | VARIANT_ROUTES), (
        "a new page or action needs its cross-team check here"
    )


@pytest.mark.parametrize("name", sorted(INVITATION_ROUTES))
def test_nobody_but_the_invitee_answers_an_invitation(charlie_client, acme_objects, acme, charlie, name):
    """An invitation of newcomer@example.com: charlie (another team, another address) gets 404
    for accepting or declining it, and it stays open."""
    invitation = acme_objects["invitation"]
    response = charlie_client.post(reverse(name, args=[invitation.id]))
    assert response.status_code == 404
    invitation.refresh_from_db()
    assert invitation.accepted_at is None and invitation.declined_at is None
    assert not Membership.objects.filter(team=acme, user=charlie).exists()


@pytest.mark.parametrize("name", PAGES)
def test_another_team_gets_404_for_acme_pages(charlie_client, acme_objects, name):
    response = charlie_client.get(_url(name, **acme_objects))
    assert response.status_code == 404
    assert acme_objects["dataset"].name not in page_text(response)


def _state(study: Study) -> dict:
    study.refresh_from_db()
    return {field: getattr(study, field) for field in STUDY_STATE}


@pytest.mark.parametrize("name", list(ACTIONS))
def test_another_team_gets_404_for_acme_study_actions_and_nothing_changes(
    charlie_client, acme_objects, name
):
    data, status = ACTIONS[name]
    study = acme_objects["study"]
    if status == Study.Status.RUNNING:
        study_start(study=study)
    elif status != study.status:  # an ended study (what an extension needs)
        Study.objects.filter(pk=study.pk).update(status=status)
        study.refresh_from_db()
    before, models_before = _state(study), TrainedModel.objects.count()
    response = charlie_client.post(_url(name, **acme_objects), data)
    assert response.status_code == 404
    assert _state(study) == before
    assert TrainedModel.objects.count() == models_before
    assert not TrialRerun.objects.exists()
    acme_objects["trial"].refresh_from_db()
    assert (acme_objects["trial"].notes, acme_objects["trial"].tags) == ("", [])
    assert study.status == status


@pytest.mark.parametrize("name", list(TEAM_ACTIONS))
def test_another_teams_owner_gets_404_for_acme_member_and_invitation_actions_and_nothing_changes(
    charlie_client, acme_objects, name
):
    membership, invitation = acme_objects["membership"], acme_objects["invitation"]
    response = charlie_client.post(_url(name, **acme_objects), TEAM_ACTIONS[name])
    assert response.status_code == 404
    membership.refresh_from_db()
    assert membership.role == Membership.Role.OWNER
    assert Invitation.objects.filter(pk=invitation.pk, accepted_at__isnull=True).exists()
    assert "alice" not in page_text(charlie_client.get(reverse("team_settings")))


def test_another_team_gets_404_comparing_acme_studies_alone_or_with_its_own(charlie_client, globex, charlie,
                                                                            acme, alice, acme_objects):
    second = saved_study(acme, alice, acme_objects["dataset"], name="second acme study", hypermodel="dense")
    own = _globex_study(globex, charlie)
    for picked in ([acme_objects["study"].id, second.id], [own.id, second.id]):
        response = charlie_client.get(reverse("studies_compare"), {"studies": picked})
        assert response.status_code == 404
        assert "second acme study" not in page_text(response)


def test_another_team_cannot_reach_acme_trial_through_its_own_study(
    charlie_client, globex, charlie, acme_trial
):
    own_study = _globex_study(globex, charlie)
    response = charlie_client.get(
        reverse("trial_detail", kwargs={"study_id": own_study.id, "trial_pk": acme_trial.pk})
    )
    assert response.status_code == 404


def test_another_team_does_not_see_acme_objects_in_its_lists(charlie_client, acme_objects):
    for name in ("dashboard", "dataset_list", "study_list", "model_list", "registry_list"):
        response = charlie_client.get(reverse(name))
        assert response.status_code == 200
        assert acme_objects["study"].name not in page_text(response)
        assert acme_objects["model"].name not in page_text(response)
        assert reverse("dataset_detail", args=[acme_objects["dataset"].id]) not in page_text(
            response
        )


@pytest.mark.parametrize("name", PAGES)
def test_alice_sees_her_own_pages(alice_client, acme_objects, name):
    url = _url(name, **acme_objects)
    if name == "study_compare":  # comparing takes two trials
        other = Trial.objects.create(study=acme_objects["study"], trial_id="1", number=2, status="completed")
        url = url.rsplit("&", 1)[0] + f"&trials={other.pk}"
    response = alice_client.get(url)
    assert response.status_code == 200


def test_alice_starts_rebudgets_and_cancels_her_own_study(alice_client, acme_objects):
    study = acme_objects["study"]
    assert alice_client.post(_url("study_start", **acme_objects)).status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.RUNNING
    response = alice_client.post(
        _url("study_budget", **acme_objects), {"max_trials": 50, "parallelism": 4}
    )
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.max_trials, study.parallelism) == (50, 4)
    assert alice_client.post(_url("study_cancel", **acme_objects)).status_code == 302
    study.refresh_from_db()
    assert study.status == Study.Status.CANCELLED


def test_a_trial_is_not_found_under_a_study_it_does_not_belong_to(
    alice_client, acme, alice, acme_dataset, acme_trial
):
    other = saved_study(acme, alice, acme_dataset, name="other", hypermodel="dense")
    response = alice_client.get(
        reverse("trial_detail", kwargs={"study_id": other.id, "trial_pk": acme_trial.pk})
    )
    assert response.status_code == 404


def test_switching_to_a_team_you_are_not_a_member_of_is_404(alice_client, globex, acme_dataset):
    response = alice_client.post(reverse("switch_team"), {"team": globex.id})
    assert response.status_code == 404
    # Still working in acme.
    assert alice_client.get(reverse("dataset_detail", args=[acme_dataset.id])).status_code == 200


def test_switching_to_a_team_that_does_not_exist_is_404(alice_client):
    assert alice_client.post(reverse("switch_team"), {"team": 999_999}).status_code == 404
    assert alice_client.post(reverse("switch_team"), {"team": "not a number"}).status_code == 404


def test_switching_to_another_of_your_teams_changes_what_you_see(
    alice_client, alice, globex, charlie, acme_dataset
):
    membership_add(team=globex, user=alice, role=Membership.Role.VIEWER)
    globex_study = _globex_study(globex, charlie)

    response = alice_client.post(reverse("switch_team"), {"team": globex.id})
    assert response.status_code == 302

    assert alice_client.get(reverse("study_detail", args=[globex_study.id])).status_code == 200
    assert alice_client.get(reverse("dataset_detail", args=[acme_dataset.id])).status_code == 404


@pytest.mark.parametrize(
    "name",
    [
        "dashboard",
        "dataset_list",
        "dataset_upload",
        "study_list",
        "study_new",
        "worker_list",
        "model_list",
        "registry_list",
        "team_settings",
        "studies_compare",
        *PAGES,
    ],
)
def test_a_user_with_no_team_sees_the_no_team_yet_page(
    client, django_user_model, acme_objects, name
):
    client.force_login(django_user_model.objects.create_user(username="dora", password="x" * 12))
    response = client.get(_url(name, **acme_objects))
    assert response.status_code == 200
    assert "No team yet" in page_text(response)
    assert acme_objects["dataset"].name not in page_text(response)


@pytest.mark.parametrize("name", [p.name for p in experiment_urls.urlpatterns])
def test_anonymous_users_are_redirected_to_login(client, acme_objects, name):
    url = _url(name, **acme_objects)
    response = client.post(url) if name in POST_ONLY else client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_anonymous_posts_change_nothing(client, acme_objects):
    study = acme_objects["study"]
    client.post(_url("study_start", **acme_objects))
    study.refresh_from_db()
    assert study.status == Study.Status.CREATED
