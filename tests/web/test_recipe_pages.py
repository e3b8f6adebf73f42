"""Ensemble recipes' pages: create, edit and clone through the form; each bad recipe is refused
with its message and saves nothing; the preview lists picked and not-picked with reasons; the
recipe page shows its runs (collapsed warning, comparison, changes); other teams get 404. The
page says who triggered runs act for and, once that member left or was demoted, that the trigger
is stopped and why; owners take it over there. Run now while a run waits is refused with a
message and starts nothing; a run whose ensemble the registry already holds says so."""

import pytest
from django.urls import reverse

from experiments.models import AuditEvent, EnsembleRecipe, Membership, ModelVersion, RecipeRun, TrainedModel
from experiments.services.datasets import dataset_create_bundled
from experiments.services.memberships import membership_add, membership_remove
from experiments.services.recipe_triggers import recipes_on_study_completed
from experiments.services.recipes import recipe_create
from experiments.services.registry import registry_register
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_ensemble
from tests.web.pages import page_text, shows
from tests.web.recipe_rows import recipe_data, study_with_trials
from tests.web.registry_rows import registrable, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def dense(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "dense search", "dense", [0.30, 0.31, 0.40])


@pytest.fixture
def tiny(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "tiny search", "tiny", [0.35, 0.36])


@pytest.fixture
def recipe(acme, alice, acme_dataset, dense, tiny):
    return recipe_create(team=acme, user=alice, data={
        "name": "diverse", "dataset": acme_dataset, "source_studies": [dense, tiny], "top_k": 3, "per_group_max": 1})


def _new(client, data):
    return client.post(reverse("recipe_new"), data)


def test_a_recipe_made_from_the_form_is_saved_and_audited(alice_client, acme_dataset, dense, tiny):
    response = _new(alice_client, recipe_data(acme_dataset, dense, tiny, register_as="iris-best",
                                              alias="production"))
    recipe = EnsembleRecipe.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("recipe_detail", args=[recipe.id])
    assert sorted(recipe.source_studies.values_list("name", flat=True)) == ["dense search", "tiny search"]
    assert (recipe.register_as, recipe.alias, recipe.members_as) == ("iris-best", "production", "retrained")
    assert AuditEvent.objects.filter(verb="recipe.create").exists()
    page = page_text(alice_client.get(response["Location"]))
    assert "at most 1 per hypermodel" in page and "moving @production only when it beats" in page
    assert "No runs yet" in page


@pytest.mark.parametrize("case, message", [
    ("no sources", "Give the recipe's sources"),
    ("k zero", "Top K must be a whole number from 1 to 50."),
    ("untagged", "No study of iris carries the tag 'gone'"),
    ("other dataset", "is of dataset"),
    ("two datasets", "The studies are of different datasets"),
    ("other team", "was not found in this team"),
    ("cap zero", "No pair of models satisfies a correlation cap of 0"),
    ("cap above one", "No pair of models satisfies a correlation cap of 1.5"),
    ("alias alone", "An alias needs Register as"),
    ("bad name", "may hold only lower-case letters"),
    ("taken name", "already has a recipe named 'diverse'"),
    ("rounds", "Greedy rounds must be a whole number from 1 to 1,000."),
])
def test_each_bad_recipe_is_refused_with_its_message_and_nothing_saved(
        alice_client, acme, alice, charlie, globex, acme_dataset, dense, tiny, case, message):
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    wine_study = saved_study(acme, alice, wine, name="wine search")
    other = saved_study(globex, charlie, dataset_create_bundled(team=globex, user=charlie, bundled_name="iris"),
                        name="globex study")
    if case == "taken name":
        recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                   "source_studies": [dense]})
    before = EnsembleRecipe.objects.count()
    data = recipe_data(acme_dataset, dense, tiny, **{
        "no sources": {"source_studies": []},
        "k zero": {"top_k": 0},
        "untagged": {"source_studies": [], "source_tag": "gone"},
        "other dataset": {"source_studies": [wine_study.id]},
        "two datasets": {"source_studies": [dense.id, wine_study.id]},
        "other team": {"source_studies": [other.id]},
        "cap zero": {"correlation_cap": "0"},
        "cap above one": {"correlation_cap": "1.5"},
        "alias alone": {"alias": "production"},
        "bad name": {"name": "Diverse Mix"},
        "taken name": {},
        "rounds": {"greedy_rounds": 0},
    }[case])
    response = _new(alice_client, data)
    assert response.status_code == 200
    assert shows(response, message), page_text(response)
    assert EnsembleRecipe.objects.count() == before


def test_a_recipe_run_by_study_events_may_wait_for_a_tag_no_study_carries_yet(alice_client, acme_dataset):
    response = _new(alice_client, recipe_data(acme_dataset, source_studies=[], source_tag="later",
                                              trigger="study_completed"))
    assert response.status_code == 302
    assert EnsembleRecipe.objects.get().source_tag == "later"


def test_tag_sources_pick_every_tagged_study_of_the_dataset(alice_client, acme_dataset, dense, tiny):
    alice_client.post(reverse("study_tags", args=[dense.id]), {"tags": "Ensemble, wide"})
    dense.refresh_from_db()
    assert dense.tags == ["ensemble", "wide"]
    response = _new(alice_client, recipe_data(acme_dataset, source_studies=[], source_tag="ensemble"))
    assert response.status_code == 302
    detail = alice_client.get(response["Location"])
    assert shows(detail, "every study tagged 'ensemble'")
    assert "dense search" in page_text(detail) and "tiny search" not in page_text(detail)


def test_the_preview_lists_picked_and_not_picked_with_reasons(alice_client, acme_dataset, dense, tiny):
    response = alice_client.post(reverse("recipe_preview"), recipe_data(acme_dataset, dense, tiny),
                                 HTTP_HX_REQUEST="true")
    page = page_text(response)
    assert response.status_code == 200 and "<html" not in response.content.decode()
    assert page.count("not picked") == 3, page  # dense's 2nd and 3rd, tiny's 2nd: one per hypermodel
    assert "hypermodel dense already has 1" in page and "hypermodel tiny already has 1" in page
    assert "retrained in the run" in page


def test_the_preview_warns_when_fewer_than_two_would_be_picked(alice_client, acme_dataset, dense):
    page = page_text(alice_client.post(reverse("recipe_preview"), recipe_data(acme_dataset, dense)))
    assert "Today the rule picks 1 member" in page and "will wait for its studies" in page
    response = _new(alice_client, recipe_data(acme_dataset, dense))
    assert response.status_code == 302, "a recipe may wait for studies"


def test_the_preview_says_which_source_is_wrong(alice_client, acme_dataset):
    response = alice_client.post(reverse("recipe_preview"), recipe_data(acme_dataset, source_studies=[]))
    assert shows(response, "Give the recipe's sources")


def test_edit_changes_the_recipe_and_stamps_it(alice_client, recipe, dense):
    stamped = recipe.updated
    page = page_text(alice_client.get(reverse("recipe_edit", args=[recipe.id])))
    assert 'value="diverse"' in alice_client.get(reverse("recipe_edit", args=[recipe.id])).content.decode()
    assert "Who would be picked today" in page
    response = alice_client.post(reverse("recipe_edit", args=[recipe.id]), recipe_data(
        recipe.dataset, dense, per_group_max=2, method="stacking"))
    assert response.status_code == 302
    recipe.refresh_from_db()
    assert (recipe.per_group_max, recipe.method) == (2, "stacking") and recipe.updated > stamped
    assert list(recipe.source_studies.values_list("id", flat=True)) == [dense.id]


def test_edit_refuses_a_bad_change_and_keeps_the_recipe(alice_client, recipe, dense):
    response = alice_client.post(reverse("recipe_edit", args=[recipe.id]),
                                 recipe_data(recipe.dataset, dense, top_k=0))
    assert shows(response, "Top K must be a whole number from 1 to 50.")
    recipe.refresh_from_db()
    assert recipe.top_k == 3


def test_clone_copies_the_rule_under_a_new_name(alice_client, recipe):
    assert shows(alice_client.post(reverse("recipe_clone", args=[recipe.id]), {"name": "diverse"}),
                 "already has a recipe named 'diverse'")
    response = alice_client.post(reverse("recipe_clone", args=[recipe.id]), {"name": "diverse-2"})
    copy = EnsembleRecipe.objects.get(name="diverse-2")
    assert response.status_code == 302
    assert sorted(copy.source_studies.values_list("id", flat=True)) == sorted(
        recipe.source_studies.values_list("id", flat=True))
    assert EnsembleRecipe.objects.count() == 2


def test_the_list_and_the_navigation_show_recipes(alice_client, recipe):
    page = page_text(alice_client.get(reverse("recipe_list")))
    assert "diverse" in page and "Weights by Nelder–Mead" in page and "never run" in page
    assert 'href="/recipes/"' in alice_client.get(reverse("dashboard")).content.decode()
    assert "ensemble recipe" in page_text(alice_client.get(reverse("ensemble_new")))


def test_runs_show_members_comparison_changes_and_the_collapse_warning(alice_client, recipe):
    RecipeRun.objects.create(recipe=recipe, number=1, trigger="manual", status="completed",
                             members=["trial:1", "trial:2"], comparison={"metric": "loss"})
    RecipeRun.objects.create(
        recipe=recipe, number=2, trigger="study_completed", reason="study dense search completed",
        status="completed", members=["trial:1", "trial:3"], promoted=False,
        comparison={"metric": "loss", "ensemble": {"val": {"loss": 0.3}, "test": {"loss": 0.31}},
                    "best_member": {"label": "dense trial 1", "val": {"loss": 0.3}, "test": {"loss": 0.31}},
                    "mean": {"val": {"loss": 0.33}, "test": {"loss": 0.34}}, "collapsed": True,
                    "collapsed_reason": "weight 1 on dense trial 1", "changes": {"added": ["trial:3"],
                                                                                 "removed": ["trial:2"]},
                    "champion": {"version": 1, "val": 0.29}, "rule": "lower validation loss wins",
                    "verdict": "kept v1"})
    RecipeRun.objects.create(recipe=recipe, number=3, trigger="manual", status="failed", error="no members",
                             comparison={"ensemble": {"val": 0.5}})
    stacked = TrainedModel.objects.create(
        team=recipe.team, dataset=recipe.dataset, kind="ensemble", name="diverse", version=1, method="stacking",
        seed=1, status="completed", report={"meta_learner": {"kind": "logistic", "features": "log_probabilities",
                                                              "strength": 0.1, "folds": 5, "cv_loss": 0.21}})
    RecipeRun.objects.create(recipe=recipe, number=4, trigger="manual", status="completed", ensemble=stacked)
    page = page_text(alice_client.get(reverse("recipe_detail", args=[recipe.id])))
    assert "This ensemble equals its best member, so it adds nothing: weight 1 on dense trial 1" in page
    assert "added trial:3" in page and "removed trial:2" in page and "First run." in page
    assert "dense trial 1" in page and "loss 0.3300" in page and "study dense search completed" in page
    assert "no members" in page
    assert "L2 logistic regression on the members' class log-probabilities, strength 0.1 chosen by 5-fold" in page


@pytest.mark.parametrize("name, method, data", [
    ("recipe_detail", "get", None), ("recipe_edit", "get", None), ("recipe_edit", "post", {"name": "stolen"}),
    ("recipe_clone", "get", None), ("recipe_clone", "post", {"name": "stolen"}),
    ("recipe_preview_saved", "get", None), ("recipe_run", "post", {}), ("recipe_take_over", "post", {}),
    ("recipe_delete", "post", {}), ("recipe_runs_live", "get", None),
])
def test_another_team_gets_404_on_every_recipe_route(client, charlie, recipe, name, method, data):
    client.force_login(charlie)
    response = getattr(client, method)(reverse(name, args=[recipe.id]), data or {})
    assert response.status_code == 404
    assert list(EnsembleRecipe.objects.values_list("name", "acts_for__username")) == [("diverse", "alice")]
    assert not RecipeRun.objects.exists()


def test_another_teams_preview_sees_nothing_of_acme(client, charlie, recipe, dense):
    client.force_login(charlie)
    page = page_text(client.post(reverse("recipe_preview"), recipe_data(recipe.dataset, dense)))
    assert "dense search" not in page and "not found in this team" in page
    assert "diverse" not in page_text(client.get(reverse("recipe_list")))


def test_viewers_cannot_change_recipes(client, bob, recipe, acme_dataset, dense, tiny):
    client.force_login(bob)
    if bob.memberships.get().can_edit:
        pytest.skip("bob is an editor in this fixture set")
    assert _new(client, recipe_data(acme_dataset, dense, tiny, name="other")).status_code == 403
    assert client.post(reverse("recipe_delete", args=[recipe.id])).status_code == 403
    assert EnsembleRecipe.objects.count() == 1


def test_delete_removes_the_recipe(alice_client, recipe):
    response = alice_client.post(reverse("recipe_delete", args=[recipe.id]))
    assert response.status_code == 302 and not EnsembleRecipe.objects.exists()
    assert AuditEvent.objects.filter(verb="recipe.delete").exists()


def test_run_now_starts_a_run_and_a_refusal_says_why(alice_client, recipe, acme, alice, acme_dataset, dense):
    response = alice_client.post(reverse("recipe_run", args=[recipe.id]), follow=True)
    run = RecipeRun.objects.get()
    assert (run.number, run.trigger, len(run.members)) == (1, "manual", 2)
    assert shows(response, "Started run 1 of diverse.") and "Run 1" in page_text(response)
    # The page head keeps its buttons together at the right (its children are spread apart).
    assert '<div class="actions" id="recipe-actions">' in page_text(response)
    lonely = recipe_create(team=acme, user=alice, data={"name": "lonely", "dataset": acme_dataset,
                                                        "source_studies": [dense]})
    response = alice_client.post(reverse("recipe_run", args=[lonely.id]), follow=True)
    assert not lonely.runs.exists() and "flash-error" in page_text(response)


def _cache(team, trial, predictions) -> None:
    import io

    import numpy as np

    from experiments.services.prediction_cache import cached_predictions_store

    buffer = io.BytesIO()
    np.savez(buffer, predictions=np.asarray(predictions, dtype="float32"))
    buffer.seek(0)
    cached_predictions_store(team=team, key=f"trial:{trial.id}:val", fileobj=buffer)


def test_a_cap_that_leaves_one_member_of_todays_picks_is_refused(alice_client, acme, acme_dataset, dense, tiny):
    best_dense, best_tiny = dense.trials.get(number=1), tiny.trials.get(number=1)
    _cache(acme, best_dense, [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    _cache(acme, best_tiny, [[0.8, 0.2], [0.3, 0.7], [0.7, 0.3]])  # nearly the same answers
    response = _new(alice_client, recipe_data(acme_dataset, dense, tiny, correlation_cap="0.5"))
    assert shows(response, "Nothing satisfies a correlation cap of 0.5"), page_text(response)
    assert not EnsembleRecipe.objects.exists()
    assert _new(alice_client, recipe_data(acme_dataset, dense, tiny, correlation_cap="0.999")).status_code == 302


# Who a recipe acts for; Run now while a run waits; a run the registry already holds.
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


def test_run_now_while_a_run_waits_is_refused_with_a_message(alice_client, recipe):
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
    # With no ensemble to list, the run names its members as the preview does, not by their keys.
    assert shows(response, "Members: dense search trial 1, tiny search trial 1") and "model:" not in page_text(response)
