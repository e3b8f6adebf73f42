"""Recipes act only for members: a recipe's triggered runs act for its acts_for member (its creator
until an owner takes it over) and start nothing once that member has left or been demoted, with
the reason kept on the recipe; a run whose member leaves while it waits or builds neither builds
nor registers; every registry change a recipe makes is audited with the member and the recipe
(outside any request: here, as in a worker), and the alias history names that member."""

import pytest

from experiments.models import AliasMove, AuditEvent, EnsembleRecipe, Membership, ModelVersion, RecipeRun, TrainedModel
from experiments.selectors.recipe_lists import recipe_triggers_stopped
from experiments.services.memberships import membership_remove, membership_set_role
from experiments.services.recipe_runs import RecipeRunStopped, recipe_run_start
from experiments.services.recipe_triggers import recipes_on_new_candidate, recipes_on_study_completed
from experiments.services.recipes import RecipeError, recipe_create, recipe_take_over
from tests.lifecycle.test_recipe_runs import (
    _existing_models,
    completed,
    ensemble_report,
    finish,
)

pytestmark = pytest.mark.django_db
Status = RecipeRun.Status


def daves_recipe(acme, dave, studies, **options) -> EnsembleRecipe:
    data = {"name": "blend", "dataset": studies[0].dataset, "source_studies": list(studies),
            "trigger": "study_completed", "members_as": "existing", "register_as": "iris-blend",
            "alias": "production", **options}
    return recipe_create(team=acme, user=dave, data=data)


def finish_ensemble(run, val_loss=0.2):
    labels = [str(m.model) for m in run.ensemble.members.order_by("position")]
    finish(run.ensemble, val_loss=val_loss, report=ensemble_report(labels, weights=[0.6, 0.4]))
    run.refresh_from_db()
    return run


def registry_rows():
    return AuditEvent.objects.filter(verb__startswith="registry.").order_by("id")


def test_a_removed_editors_recipe_stops_until_an_owner_takes_it_over(acme, alice, dave, two_studies):
    dense, other, _ = two_studies
    _existing_models(two_studies, alice)
    recipe = daves_recipe(acme, dave, [dense, other])
    assert recipe.acts_for == dave and recipe_triggers_stopped(recipe=recipe) == ""
    membership_remove(membership=Membership.objects.get(team=acme, user=dave))

    completed(dense)
    recipes_on_study_completed(study_id=dense.id)
    recipe.refresh_from_db()
    assert not recipe.runs.exists() and not TrainedModel.objects.filter(kind="ensemble").exists()
    assert recipe.last_skipped.startswith("Study dense-search completed. No run was started: dave is no longer a "
                                          "member of Acme.")
    assert recipe.last_skipped_at is not None
    assert recipe_triggers_stopped(recipe=recipe).startswith("Triggered runs are stopped: dave is no longer a "
                                                             "member of Acme.")
    assert not ModelVersion.objects.exists() and not registry_rows().exists()

    recipe = recipe_take_over(recipe=recipe, user=alice)
    assert (recipe.acts_for, recipe.last_skipped, recipe.last_skipped_at) == (alice, "", None)
    taken = AuditEvent.objects.get(verb="recipe.take_over")
    assert (taken.actor, taken.team_id, taken.changes) == (alice, acme.id, {"acts_for": ["dave", "alice"]})
    assert recipe_triggers_stopped(recipe=recipe) == ""

    completed(other)
    recipes_on_study_completed(study_id=other.id)
    (run,) = recipe.runs.all()
    assert run.created_by == alice and run.status == Status.BUILDING and run.ensemble.created_by == alice
    finish_ensemble(run)
    assert run.status == Status.COMPLETED and run.registered.version == 1 and run.promoted
    assert run.registered.created_by == alice
    assert list(AliasMove.objects.values_list("user__username", flat=True)) == ["alice"]
    rows = list(registry_rows())
    assert [r.verb for r in rows] == ["registry.register", "registry.alias_set"]
    for row in rows:
        assert (row.actor, row.actor_email, row.team_id) == (alice, alice.email or None, acme.id)
        assert (row.changes["recipe"], row.changes["run"]) == ("blend", 1)
    assert not AuditEvent.objects.filter(actor=dave).exists()


def test_a_demoted_editors_recipe_stops_and_an_owner_takes_it_over(acme, alice, dave, two_studies):
    dense, other, _ = two_studies
    _existing_models(two_studies, alice)
    recipe = daves_recipe(acme, dave, [dense, other], trigger="new_candidate")
    membership_set_role(membership=Membership.objects.get(team=acme, user=dave), role=Membership.Role.VIEWER)
    recipes_on_new_candidate(study_id=dense.id)
    recipe.refresh_from_db()
    assert not recipe.runs.exists()
    assert "No run was started: dave is a viewer of Acme now." in recipe.last_skipped
    assert "dave is a viewer of Acme now" in recipe_triggers_stopped(recipe=recipe)
    with pytest.raises(RecipeError, match="Only the team's owners can take a recipe over."):
        recipe_take_over(recipe=recipe, user=dave)
    recipe_take_over(recipe=recipe, user=alice)
    with pytest.raises(RecipeError, match="blend already acts for you."):
        recipe_take_over(recipe=recipe, user=alice)
    recipes_on_new_candidate(study_id=dense.id)
    (run,) = recipe.runs.all()
    assert run.created_by == alice and run.trigger == "new_candidate"


def test_a_recipe_whose_member_was_deleted_stops(acme, alice, dave, two_studies):
    dense, other, _ = two_studies
    recipe = daves_recipe(acme, dave, [dense, other])
    dave.delete()
    recipe.refresh_from_db()
    assert recipe.acts_for is None
    assert "the account it acted for was deleted" in recipe_triggers_stopped(recipe=recipe)
    with pytest.raises(RecipeRunStopped, match="the account it acted for was deleted"):
        recipe_run_start(recipe=recipe, user=None, trigger="study_completed", trigger_key=f"study:{dense.id}")
    assert not RecipeRun.objects.exists()


def test_a_member_removed_while_the_run_waits_builds_nothing(acme, alice, dave, two_studies):
    dense, other, _ = two_studies
    recipe = daves_recipe(acme, dave, [dense, other], members_as="retrained")
    run = recipe_run_start(recipe=recipe, user=dave, trigger="study_completed", trigger_key="study:1")
    assert run.status == Status.WAITING and run.created_by == dave
    membership_remove(membership=Membership.objects.get(team=acme, user=dave))
    for model in run.waiting_on.all():
        finish(model)
    run.refresh_from_db()
    assert run.status == Status.FAILED and run.ensemble is None
    assert run.error.startswith("The run stopped before building its ensemble: dave is no longer a member of Acme.")
    assert not TrainedModel.objects.filter(kind="ensemble").exists()


def test_a_member_removed_while_the_ensemble_builds_registers_nothing(acme, alice, dave, two_studies):
    dense, other, _ = two_studies
    _existing_models(two_studies, alice)
    recipe = daves_recipe(acme, dave, [dense, other])
    run = recipe_run_start(recipe=recipe, user=dave, trigger="study_completed", trigger_key="study:1")
    assert run.status == Status.BUILDING
    membership_remove(membership=Membership.objects.get(team=acme, user=dave))
    finish_ensemble(run)
    assert run.status == Status.COMPLETED and run.registered is None and not run.promoted
    assert run.comparison["verdict"].startswith("not registered: dave is no longer a member of Acme.")
    assert not ModelVersion.objects.exists() and not AliasMove.objects.exists() and not registry_rows().exists()


def test_every_registry_change_of_a_recipe_names_its_member_and_the_recipe(acme, alice, dave, two_studies):
    """Runs acting for dave while he is an editor: registered, promoted, then kept the champion."""
    dense, other, _ = two_studies
    _existing_models(two_studies, alice)
    recipe = daves_recipe(acme, dave, [dense, other], trigger="manual")
    first = finish_ensemble(recipe_run_start(recipe=recipe, user=dave), val_loss=0.2)
    EnsembleRecipe.objects.filter(pk=recipe.pk).update(method="mean")
    second = finish_ensemble(recipe_run_start(recipe=recipe, user=dave), val_loss=0.3)
    assert (first.promoted, second.promoted, second.registered.version) == (True, False, 2)
    rows = list(registry_rows())
    assert [(r.verb, r.changes.get("version") or r.changes.get("to")) for r in rows] == [
        ("registry.register", 1), ("registry.alias_set", 1), ("registry.register", 2)]
    assert {(r.actor_id, r.changes["recipe"]) for r in rows} == {(dave.id, "blend")}
    assert [r.changes["run"] for r in rows] == [1, 1, 2]
    assert list(AliasMove.objects.values_list("user", flat=True)) == [dave.id]


def test_a_trigger_with_fewer_than_two_picks_says_so_on_the_recipe(acme, alice, two_studies):
    """It was only logged by the worker: the recipe's page and API showed nothing of it."""
    dense, other, _ = two_studies
    _existing_models(two_studies, alice)
    recipe = daves_recipe(acme, alice, [dense])  # one per hypermodel: one pick
    completed(dense)
    recipes_on_study_completed(study_id=dense.id)
    recipe.refresh_from_db()
    assert not recipe.runs.exists() and recipe.last_skipped_at is not None
    assert recipe.last_skipped.startswith("Study dense-search completed. Only 1 candidate is picked today: "
                                          "dense-search trial 2. An ensemble needs at least two members")
    assert recipe_triggers_stopped(recipe=recipe) == ""  # its member may act: nothing is stopped
    recipe.source_studies.add(other)
    completed(other)
    recipes_on_study_completed(study_id=other.id)
    recipe.refresh_from_db()
    assert recipe.runs.count() == 1 and (recipe.last_skipped, recipe.last_skipped_at) == ("", None)

