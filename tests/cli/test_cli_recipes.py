"""`tuneboard recipe list/show/create/clone/preview/run` against a live server: a recipe made
from the command line, refused with the page's messages, previewed, cloned and run."""

import json

import pytest

if not __import__("django.conf").conf.settings.configured:  # run with -p no:django: unit tests only
    pytest.skip("needs pytest-django (the live server and the test database)", allow_module_level=True)

from tuneboard_client.cli import common  # noqa: E402

from experiments.models import EnsembleRecipe, RecipeRun  # noqa: E402
from experiments.services.datasets import dataset_create_bundled  # noqa: E402
from tests.web.recipe_rows import study_with_trials  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_recipes_from_the_command_line(acme, alice, live_tuneboard, monkeypatch):
    tuneboard = live_tuneboard
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    dense = study_with_trials(acme, alice, iris, "dense-search", "dense", [0.30, 0.31])
    study_with_trials(acme, alice, iris, "tiny-search", "tiny", [0.35])
    refused = tuneboard("recipe", "create", "--name", "mix", "--dataset", "iris", "--study", dense.id, "--top-k", 0,
                        code=1)
    assert "Top K must be a whole number from 1 to 50." in refused
    assert "Give the recipe's sources" in tuneboard("recipe", "create", "--name", "mix", "--dataset", "iris", code=1)
    assert "An alias needs Register as" in tuneboard("recipe", "create", "--name", "mix", "--dataset", "iris",
                                                     "--study", dense.id, "--alias", "production", code=1)
    assert not EnsembleRecipe.objects.exists()

    saved = tuneboard("recipe", "create", "--name", "mix", "--dataset", "iris", "--study", "dense-search",
                      "--study", "tiny-search", "--top-k", 2, "--per-group-max", 1, "--method", "nelder-mead",
                      "--trigger", "study_completed", "--register-as", "iris-mix", "--alias", "production")
    recipe = EnsembleRecipe.objects.get()
    assert saved.strip() == f"Saved recipe mix (id {recipe.id})."
    assert (recipe.method, recipe.trigger, recipe.alias, recipe.top_k) == ("nelder_mead", "study_completed",
                                                                           "production", 2)
    assert "mix" in tuneboard("recipe", "list") and "study_completed" in tuneboard("recipe", "list")

    preview = tuneboard("recipe", "preview", recipe.id)
    assert "hypermodel dense already has 1" in preview and preview.count("retrained in the run") == 2
    assert json.loads(tuneboard("-o", "json", "recipe", "preview", "mix"))["picked"] == 2

    assert "Cloned as mix-2" in tuneboard("recipe", "clone", recipe.id, "--name", "mix-2")
    assert "already has a recipe named 'mix-2'" in tuneboard("recipe", "clone", "mix", "--name", "mix-2", code=1)

    run = tuneboard("recipe", "run", "mix")
    assert run.startswith("Run 1: waiting")  # members as retrained: the run waits for its retrains
    busy = tuneboard("recipe", "run", "mix", code=1)  # a second click while it waits: the API's 409
    assert busy.strip() == ("Error: Run 1 of mix is waiting for its retrains: nothing was started. Run the recipe "
                            "again once it has ended.")
    assert RecipeRun.objects.count() == 1
    shown = tuneboard("recipe", "show", "mix")
    assert "top_k" in shown and "waiting" in shown and RecipeRun.objects.count() == 1
    assert "acts_for" in shown and "alice" in shown
    assert "No recipe named 'nope'" in tuneboard("recipe", "show", "nope", code=1)

    def run_fails(seconds):  # the poll's pause: the run's retrains fail meanwhile
        RecipeRun.objects.filter(number=2).update(status="failed", error="A retrain failed.")

    monkeypatch.setattr(common, "POLL_SLEEP", run_fails)
    RecipeRun.objects.update(status="completed")
    waited = tuneboard("recipe", "run", recipe.id, "--wait", code=1)
    assert "Run 2: failed." in waited and "A retrain failed." in waited
