"""Ensemble recipes through the API: create, read, PATCH, PUT, clone, preview, runs, delete; the
same refusals with the pages' messages, nothing saved; other teams get 404 on every route. Run now
while a run waits is a 409; the detail names who triggered runs act for and why the trigger is
stopped; owners take a recipe over (audited), editors and viewers get 403."""

import pytest

from experiments.models import AuditEvent, EnsembleRecipe, Membership, RecipeRun, TrainedModel
from experiments.services.datasets import dataset_create_bundled
from experiments.services.memberships import membership_add, membership_set_role
from experiments.services.recipe_triggers import recipes_on_study_completed
from experiments.services.recipes import recipe_create
from tests.api.conftest import token_client
from tests.integration.helpers import saved_study
from tests.web.recipe_rows import recipe_data, study_with_trials

pytestmark = pytest.mark.django_db


@pytest.fixture
def dense(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "dense search", "dense", [0.30, 0.31, 0.40])


@pytest.fixture
def tiny(acme, alice, acme_dataset):
    return study_with_trials(acme, alice, acme_dataset, "tiny search", "tiny", [0.35, 0.36])


@pytest.fixture
def recipe(acme, alice, acme_dataset, dense, tiny):
    return recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                      "source_studies": [dense, tiny]})


def _json(dataset, *studies, **changes) -> dict:
    data = recipe_data(dataset, *studies, **changes)
    if data["correlation_cap"] == "":
        data["correlation_cap"] = None
    return data


def test_create_read_change_clone_and_delete(alice_api, acme_dataset, dense, tiny):
    created = alice_api.post("/api/v1/recipes/", _json(acme_dataset, dense, tiny, method="stacking"), format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["name"], body["method"]) == ("diverse", "stacking")
    assert body["source_studies"] == sorted([dense.id, tiny.id])
    url = body["url"]
    assert alice_api.get("/api/v1/recipes/").json()["results"][0]["name"] == "diverse"

    patched = alice_api.patch(url, {"top_k": 5, "correlation_cap": 0.95}, format="json")
    assert patched.status_code == 200, patched.json()
    assert (patched.json()["top_k"], patched.json()["correlation_cap"], patched.json()["method"]) == (5, 0.95,
                                                                                                      "stacking")
    put = alice_api.put(url, {"name": "diverse", "dataset": acme_dataset.id, "source_studies": [dense.id]},
                        format="json")
    assert put.status_code == 200, put.json()
    assert (put.json()["top_k"], put.json()["method"], put.json()["source_studies"]) == (3, "nelder_mead",
                                                                                        [dense.id])
    clone = alice_api.post(f"{url}clone/", {"name": "diverse-2"}, format="json")
    assert clone.status_code == 201 and clone.json()["source_studies"] == [dense.id]
    assert alice_api.post(f"{url}clone/", {"name": "diverse-2"}, format="json").json()["detail"] == (
        "Name: The team already has a recipe named 'diverse-2'; pick another name.")
    assert alice_api.delete(url).status_code == 204
    assert list(EnsembleRecipe.objects.values_list("name", flat=True)) == ["diverse-2"]


@pytest.mark.parametrize("case, field, message", [
    ("no sources", "source_studies", "Give the recipe's sources"),
    ("k zero", "top_k", "Top K must be a whole number from 1 to 50."),
    ("untagged", "source_tag", "No study of iris carries the tag 'gone'"),
    ("two datasets", "source_studies", "The studies are of different datasets"),
    ("other team", "source_studies", "was not found in this team"),
    ("cap zero", "correlation_cap", "No pair of models satisfies a correlation cap of 0"),
    ("alias alone", "alias", "An alias needs Register as"),
    ("unknown field", "colour", "Unknown field."),
    ("list as name", "name", "Must be text, not a list."),
    ("huge study id", "source_studies", "Study 100000000000000000000 was not found in this team."),
    ("huge dataset id", "dataset", "That dataset was not found in this team."),
])
def test_each_bad_recipe_is_refused_with_the_pages_message(alice_api, acme, alice, globex, charlie, acme_dataset,
                                                          dense, tiny, case, field, message):
    wine_study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="wine"),
                             name="wine search")
    other = saved_study(globex, charlie, dataset_create_bundled(team=globex, user=charlie, bundled_name="iris"),
                        name="globex study")
    data = _json(acme_dataset, dense, tiny, **{
        "no sources": {"source_studies": []},
        "k zero": {"top_k": 0},
        "untagged": {"source_studies": [], "source_tag": "gone"},
        "two datasets": {"source_studies": [dense.id, wine_study.id]},
        "other team": {"source_studies": [other.id]},
        "cap zero": {"correlation_cap": 0},
        "alias alone": {"alias": "production"},
        "unknown field": {"colour": "red"},
        "list as name": {"name": ["a"]},
        # Beyond any id (SQLite cannot even bind it: it was a 500 in make run).
        "huge study id": {"source_studies": [10**20]},
        "huge dataset id": {},
    }[case])
    if case == "huge dataset id":
        data["dataset"] = 10**20
    response = alice_api.post("/api/v1/recipes/", data, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field and message in response.json()["errors"][field][0], response.json()
    assert not EnsembleRecipe.objects.exists()


def test_a_bad_patch_changes_nothing(alice_api, recipe):
    response = alice_api.patch(f"/api/v1/recipes/{recipe.id}/", {"top_k": 0}, format="json")
    assert response.status_code == 400 and "Top K must be" in response.json()["detail"]
    recipe.refresh_from_db()
    assert recipe.top_k == 3


def test_preview_lists_every_candidate_with_why(alice_api, recipe):
    body = alice_api.get(f"/api/v1/recipes/{recipe.id}/preview/").json()
    assert body["picked"] == 2 and len(body["candidates"]) == 5
    assert {c["why"] for c in body["candidates"] if not c["picked"]} == {"hypermodel dense already has 1",
                                                                         "hypermodel tiny already has 1"}


def test_runs_are_listed_newest_first(alice_api, recipe):
    RecipeRun.objects.create(recipe=recipe, number=1, trigger="manual", status="failed", error="too few")
    RecipeRun.objects.create(recipe=recipe, number=2, trigger="manual", status="waiting", members=["trial:1"])
    runs = alice_api.get(f"/api/v1/recipes/{recipe.id}/runs/").json()["results"]
    assert [r["number"] for r in runs] == [2, 1] and runs[1]["error"] == "too few"
    assert runs[0]["changes"] == {"added": ["trial:1"], "removed": []}


@pytest.mark.parametrize("method, suffix, body", [
    ("get", "", None), ("patch", "", {"top_k": 5}), ("put", "", {"name": "x", "dataset": 1}), ("delete", "", None),
    ("post", "clone/", {"name": "stolen"}), ("get", "preview/", None), ("get", "runs/", None), ("post", "runs/", {}),
    ("post", "take-over/", None),
])
def test_another_team_gets_404_on_every_recipe_route(charlie_api, recipe, method, suffix, body):
    response = getattr(charlie_api, method)(f"/api/v1/recipes/{recipe.id}/{suffix}", body, format="json")
    assert response.status_code == 404
    assert list(EnsembleRecipe.objects.values_list("name", "top_k")) == [("diverse", 3)]
    assert not RecipeRun.objects.exists()
    assert charlie_api.get("/api/v1/recipes/").json()["results"] == []


def test_viewers_cannot_write(bob_api, bob, recipe, acme_dataset, dense):
    if bob.memberships.get().can_edit:
        pytest.skip("bob is an editor in this fixture set")
    assert bob_api.post("/api/v1/recipes/", _json(acme_dataset, dense, name="x"), format="json").status_code == 403
    assert bob_api.get(f"/api/v1/recipes/{recipe.id}/").status_code == 200


def test_study_tags_are_in_the_study_api(alice_api, dense):
    dense.tags = ["ensemble"]
    dense.save(update_fields=["tags"])
    assert alice_api.get(f"/api/v1/studies/{dense.id}/").json()["tags"] == ["ensemble"]


def test_run_now_through_the_api(alice_api, recipe, acme, alice, acme_dataset, dense):
    started = alice_api.post(f"/api/v1/recipes/{recipe.id}/runs/", {"reason": "nightly"}, format="json")
    assert started.status_code == 201, started.json()
    assert (started.json()["number"], started.json()["reason"]) == (1, "nightly")
    lonely = recipe_create(team=acme, user=alice, data={"name": "lonely", "dataset": acme_dataset,
                                                        "source_studies": [dense]})
    refused = alice_api.post(f"/api/v1/recipes/{lonely.id}/runs/", {}, format="json")
    assert refused.status_code == 400 and refused.json()["detail"] and not lonely.runs.exists()


def test_run_now_while_a_run_waits_is_a_409_that_starts_nothing(alice_api, recipe):
    url = f"/api/v1/recipes/{recipe.id}/runs/"
    assert alice_api.post(url, {}, format="json").status_code == 201
    models = TrainedModel.objects.count()
    again = alice_api.post(url, {"reason": "again"}, format="json")
    assert again.status_code == 409, again.json()
    assert again.json() == {"detail": "Run 1 of diverse is waiting for its retrains: nothing was started. Run the "
                                      "recipe again once it has ended.", "field": None, "errors": {}}
    assert RecipeRun.objects.count() == 1 and TrainedModel.objects.count() == models


def test_study_tags_are_set_through_the_api(alice_api, charlie_api, dense):
    response = alice_api.patch(f"/api/v1/studies/{dense.id}/", {"tags": ["Ensemble", "wide", "wide"]}, format="json")
    assert response.status_code == 200 and response.json()["tags"] == ["ensemble", "wide"]
    assert alice_api.patch(f"/api/v1/studies/{dense.id}/", {"tags": "x"}, format="json").json()["field"] == "tags"
    too_many = alice_api.patch(f"/api/v1/studies/{dense.id}/", {"tags": [f"t{i}" for i in range(11)]}, format="json")
    assert too_many.status_code == 400 and "at most 10 tags" in too_many.json()["detail"]
    assert charlie_api.patch(f"/api/v1/studies/{dense.id}/", {"tags": []}, format="json").status_code == 404
    dense.refresh_from_db()
    assert dense.tags == ["ensemble", "wide"]


@pytest.fixture
def daves_recipe(acme, dave, acme_dataset, dense, tiny):
    return recipe_create(team=acme, user=dave, data={"name": "diverse", "dataset": acme_dataset,
                                                     "source_studies": [dense, tiny], "trigger": "study_completed"})


def test_the_detail_says_who_the_recipe_acts_for_and_why_its_trigger_stopped(alice_api, acme, dave, dense,
                                                                              daves_recipe):
    recipe = daves_recipe
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


def test_editors_and_viewers_cannot_take_a_recipe_over(acme, bob, dave, daves_recipe, django_user_model):
    recipe = daves_recipe
    erin = django_user_model.objects.create_user(username="erin", password="x" * 12)
    membership_add(team=acme, user=erin, role=Membership.Role.EDITOR)
    for person in (erin, bob):
        response = token_client(person).post(f"/api/v1/recipes/{recipe.id}/take-over/")
        assert response.status_code == 403
        assert response.json()["detail"] == "Only the team's owners can take a recipe over."
    recipe.refresh_from_db()
    assert recipe.acts_for == dave and not AuditEvent.objects.filter(verb="recipe.take_over").exists()
