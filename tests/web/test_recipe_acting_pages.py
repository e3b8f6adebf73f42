"""A recipe's page says who its triggered runs act for and, once that member has left or been
demoted, that its trigger is stopped and why; an owner takes it over there (editors and viewers
cannot). Run now while a run waits is refused with a message and starts nothing; a run whose
ensemble the registry already holds says so."""

import pytest
from django.urls import reverse

from experiments.models import AuditEvent, EnsembleRecipe, Membership, ModelVersion, RecipeRun, TrainedModel
from experiments.services.recipe_triggers import recipes_on_study_completed
from experiments.services.recipes import recipe_create
from experiments.services.registry import registry_register
from experiments.services.teams import membership_add, membership_remove
from tests.web.figures_rows import finished_ensemble
from tests.web.pages import page_text, shows
from tests.web.recipe_rows import study_with_trials
from tests.web.registry_rows import registrable, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def dense(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "dense search", "dense", [0.30, 0.31, 0.40])


@pytest.fixture
def tiny(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "tiny search", "tiny", [0.35, 0.36])


@pytest.fixture
def dave(acme, django_user_model):
    user = django_user_model.objects.create_user(username="dave", password="x" * 12)
    membership_add(team=acme, user=user, role=Membership.Role.EDITOR)
    return user


@pytest.fixture
def daves_recipe(acme, dave, acme_dataset, dense, tiny):
    return recipe_create(team=acme, user=dave, data={"name": "diverse", "dataset": acme_dataset,
                                                     "source_studies": [dense, tiny], "trigger": "study_completed"})


def test_a_removed_members_recipe_says_its_trigger_stopped_and_an_owner_takes_it_over(
        alice_client, acme, alice, dave, dense, daves_recipe):
    detail = reverse("recipe_detail", args=[daves_recipe.id])
    assert 'Triggered runs act for <strong id="acts-for">dave</strong>' in page_text(alice_client.get(detail))
    membership_remove(membership=Membership.objects.get(team=acme, user=dave))
    dense.status = "completed"
    dense.save(update_fields=["status"])
    recipes_on_study_completed(study_id=dense.id)
    page = alice_client.get(detail)
    assert shows(page, "Triggered runs are stopped: dave is no longer a member of Acme. A recipe's runs act only for "
                       "a current owner or editor of its team. An owner can take the recipe over")
    assert shows(page, "Study dense search completed. No run was started: dave is no longer a member of Acme.")
    assert 'id="take-over"' in page_text(page) and not RecipeRun.objects.exists()

    response = alice_client.post(reverse("recipe_take_over", args=[daves_recipe.id]), follow=True)
    assert shows(response, "diverse now acts for you: its triggered runs start again, as yours.")
    assert "Triggered runs are stopped" not in page_text(response) and 'id="take-over"' not in page_text(response)
    daves_recipe.refresh_from_db()
    assert daves_recipe.acts_for == alice and daves_recipe.last_skipped == ""
    event = AuditEvent.objects.get(verb="recipe.take_over")
    assert event.actor == alice and event.changes == {"acts_for": ["dave", "alice"]}
    # Taken over by its owner, the recipe's trigger starts runs again, acting for her.
    dense.refresh_from_db()
    recipes_on_study_completed(study_id=dense.id)
    assert RecipeRun.objects.get().created_by == alice


def test_only_owners_take_a_recipe_over(client, acme, alice, bob, dave, daves_recipe, django_user_model):
    erin = django_user_model.objects.create_user(username="erin", password="x" * 12)
    membership_add(team=acme, user=erin, role=Membership.Role.EDITOR)
    for person in (erin, bob):  # an editor, a viewer
        client.force_login(person)
        assert 'id="take-over"' not in page_text(client.get(reverse("recipe_detail", args=[daves_recipe.id])))
        response = client.post(reverse("recipe_take_over", args=[daves_recipe.id]))
        assert response.status_code == 403 and shows(response, "Only the team's owners can take a recipe over")
    daves_recipe.refresh_from_db()
    assert daves_recipe.acts_for == dave and not AuditEvent.objects.filter(verb="recipe.take_over").exists()


def test_run_now_while_a_run_waits_is_refused_with_a_message(alice_client, acme, alice, acme_dataset, dense, tiny):
    recipe = recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                        "source_studies": [dense, tiny]})
    run_now = reverse("recipe_run", args=[recipe.id])
    assert shows(alice_client.post(run_now, follow=True), "Started run 1 of diverse.")
    models = TrainedModel.objects.count()
    response = alice_client.post(run_now, follow=True)
    assert shows(response, "Run 1 of diverse is waiting for its retrains: nothing was started. Run the recipe again "
                           "once it has ended.")
    assert "flash-error" in page_text(response)
    assert RecipeRun.objects.count() == 1 and TrainedModel.objects.count() == models


def test_run_now_of_the_registered_ensemble_again_builds_and_registers_nothing(
        alice_client, acme, alice, acme_dataset, dense, tiny):
    members = [registrable(acme, alice, dense, 1), registrable(acme, alice, tiny, 1)]
    ensemble = finished_ensemble(acme, alice, acme_dataset, members, [0.6, 0.4], name="recipe-diverse")
    TrainedModel.objects.filter(pk=ensemble.pk).update(signature=signature())
    ensemble.refresh_from_db()
    registry_register(team=acme, model=ensemble, name="iris-blend", user=alice)
    recipe = recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                        "source_studies": [dense, tiny], "members_as": "existing",
                                                        "register_as": "iris-blend"})
    response = alice_client.post(reverse("recipe_run", args=[recipe.id]), follow=True)
    assert shows(response, "Run 1 of diverse built nothing. Same members, method and inputs as v1 (the last "
                           "version): nothing registered.")
    run = RecipeRun.objects.get()
    assert run.status == "completed" and run.ensemble is None
    assert "Verdict: same members, method and inputs as v1 (the last version): nothing registered." in page_text(
        response)
    assert ModelVersion.objects.count() == 1 and TrainedModel.objects.filter(kind="ensemble").count() == 1
    assert EnsembleRecipe.objects.get().acts_for == alice
