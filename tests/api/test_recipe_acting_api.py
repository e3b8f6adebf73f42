"""Who a recipe acts for, through the API: the recipe's detail names the member and, once they
have left or been demoted, why its trigger is stopped; owners take it over (POST
.../take-over/, audited), editors and viewers get 403 and change nothing."""

import pytest

from experiments.models import AuditEvent, Membership
from experiments.services.recipe_triggers import recipes_on_study_completed
from experiments.services.recipes import recipe_create
from experiments.services.teams import membership_add, membership_set_role
from tests.api.conftest import token_client
from tests.web.recipe_rows import study_with_trials

pytestmark = pytest.mark.django_db


@pytest.fixture
def dave(acme, django_user_model):
    user = django_user_model.objects.create_user(username="dave", password="x" * 12)
    membership_add(team=acme, user=user, role=Membership.Role.EDITOR)
    return user


@pytest.fixture
def dense(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "dense search", "dense", [0.30, 0.31, 0.40])


@pytest.fixture
def recipe(acme, dave, acme_dataset, dense):
    tiny = study_with_trials(acme, dave, acme_dataset, "tiny search", "tiny", [0.35, 0.36])
    return recipe_create(team=acme, user=dave, data={"name": "diverse", "dataset": acme_dataset,
                                                     "source_studies": [dense, tiny], "trigger": "study_completed"})


def test_the_detail_says_who_the_recipe_acts_for_and_why_its_trigger_stopped(alice_api, acme, dave, dense, recipe):
    url = f"/api/v1/recipes/{recipe.id}/"
    body = alice_api.get(url).json()
    assert (body["acts_for"], body["triggers_stopped"], body["last_skipped"], body["last_skipped_at"]) == (
        "dave", "", "", None)
    membership_set_role(membership=Membership.objects.get(team=acme, user=dave), role=Membership.Role.VIEWER)
    dense.status = "completed"
    dense.save(update_fields=["status"])
    recipes_on_study_completed(study_id=dense.id)
    body = alice_api.get(url).json()
    assert body["triggers_stopped"].startswith("Triggered runs are stopped: dave is a viewer of Acme now.")
    assert body["last_skipped"] == ("Study dense search completed. No run was started: dave is a viewer of Acme now. "
                                    "A recipe's runs act only for a current owner or editor of its team.")
    assert body["last_skipped_at"] and not recipe.runs.exists()
    assert alice_api.get("/api/v1/recipes/").json()["results"][0]["triggers_stopped"] == body["triggers_stopped"]

    taken = alice_api.post(f"{url}take-over/")
    assert taken.status_code == 200, taken.json()
    assert (taken.json()["acts_for"], taken.json()["triggers_stopped"], taken.json()["last_skipped"]) == (
        "alice", "", "")
    assert AuditEvent.objects.get(verb="recipe.take_over").actor.username == "alice"
    again = alice_api.post(f"{url}take-over/")
    assert again.status_code == 400 and again.json()["detail"] == "diverse already acts for you."


def test_editors_and_viewers_cannot_take_a_recipe_over(acme, bob, dave, recipe, django_user_model):
    erin = django_user_model.objects.create_user(username="erin", password="x" * 12)
    membership_add(team=acme, user=erin, role=Membership.Role.EDITOR)
    for person in (erin, bob):
        response = token_client(person).post(f"/api/v1/recipes/{recipe.id}/take-over/")
        assert response.status_code == 403
        assert response.json()["detail"] == "Only the team's owners can take a recipe over."
    recipe.refresh_from_db()
    assert recipe.acts_for == dave and not AuditEvent.objects.filter(verb="recipe.take_over").exists()
