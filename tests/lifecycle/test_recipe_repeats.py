"""Recipes do not repeat themselves: Run now while a run of the recipe is waiting or building starts
nothing (two racing clicks: one run), and a run whose ensemble the registry already holds — the
same members, method and options, of the same dataset — builds and registers nothing and says
which version it equals."""

import threading

import pytest
from django.db import connection

from experiments.models import EnsembleRecipe, ModelVersion, RecipeRun, ServingExport, TrainedModel
from experiments.services.recipe_outcomes import registered_twin
from experiments.services.recipe_runs import RecipeRunBusy, recipe_run_start
from experiments.services.recipes import recipe_run_now
from tests.lifecycle.test_recipe_runs import (
    _existing_models,
    build_run,
    ensemble_report,
    finish,
    recipe_of,
)

pytestmark = pytest.mark.django_db
Status = RecipeRun.Status


def test_run_now_while_a_run_waits_or_builds_is_refused_and_starts_nothing(acme, alice, two_studies):
    recipe = recipe_of(acme, alice, two_studies[:2])
    first = recipe_run_now(recipe=recipe, user=alice)
    assert first.status == Status.WAITING
    with pytest.raises(RecipeRunBusy, match=r"^Run 1 of blend is waiting for its retrains: nothing was started\."):
        recipe_run_now(recipe=recipe, user=alice)
    assert RecipeRun.objects.count() == 1 and TrainedModel.objects.count() == 2
    for model in first.waiting_on.all():
        finish(model)
    first.refresh_from_db()
    assert first.status == Status.BUILDING
    with pytest.raises(RecipeRunBusy, match="Run 1 of blend is building its ensemble"):
        recipe_run_now(recipe=recipe, user=alice)
    assert RecipeRun.objects.count() == 1 and TrainedModel.objects.filter(kind="ensemble").count() == 1
    # A trigger's event is not a click: it still starts its run (with its own key, once).
    assert recipe_run_start(recipe=recipe, user=alice, trigger="study_completed", trigger_key="study:9") is not None
    finish(first.ensemble)
    RecipeRun.objects.filter(number=2).update(status=Status.FAILED)
    assert recipe_run_now(recipe=recipe, user=alice).number == 3  # once they ended, Run now runs again


@pytest.mark.django_db(transaction=True)
def test_two_run_now_clicks_racing_start_one_run(acme, alice, two_studies):
    recipe = recipe_of(acme, alice, two_studies[:2])
    barrier, started, refused, errors = threading.Barrier(2), [], [], []

    def click():
        try:
            barrier.wait()
            started.append(recipe_run_now(recipe=recipe, user=alice, reason="click"))
        except RecipeRunBusy as exc:
            refused.append(str(exc))
        except Exception as exc:  # pragma: no cover - shown in the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and len(started) == 1 and len(refused) == 1
    assert refused[0].startswith("Run 1 of blend is waiting for its retrains")
    assert recipe.runs.count() == 1 and TrainedModel.objects.filter(method="retrain").count() == 2


def test_an_unchanged_champion_gets_no_new_version_and_the_run_says_so(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    recipe = recipe_of(acme, alice, two_studies[:2], members_as="existing", register_as="iris-blend",
                       alias="production")
    first = build_run(recipe, alice, 0.2, weights=[0.6, 0.4])
    assert first.registered.version == 1 and first.promoted
    exports, ensembles = ServingExport.objects.count(), TrainedModel.objects.filter(kind="ensemble").count()

    again = recipe_run_now(recipe=recipe, user=alice)
    assert again.status == Status.COMPLETED and again.finished is not None
    assert again.ensemble is None and again.registered is None and not again.promoted
    assert again.comparison["verdict"] == "same members, method and inputs as v1 (the champion): nothing registered"
    assert again.comparison["unchanged"] == {"version": 1, "model": first.ensemble_id}
    assert again.comparison["changes"] == {"added": [], "removed": [], "previous_run": 1}
    assert ModelVersion.objects.count() == 1 and ServingExport.objects.count() == exports
    assert TrainedModel.objects.filter(kind="ensemble").count() == ensembles  # nothing was even built

    # Another method is another ensemble: built, registered, judged.
    other = build_run(recipe, alice, 0.3, method="mean", weights=[0.5, 0.5])
    assert other.registered.version == 2 and not other.promoted
    # The same as v2, which is not the champion but the last version: not registered again either.
    last = recipe_run_now(recipe=recipe, user=alice)
    assert last.comparison["verdict"] == "same members, method and inputs as v2 (the last version): nothing registered"
    assert ModelVersion.objects.count() == 2


def test_a_twin_registered_while_the_run_built_is_not_registered_again(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    recipe = recipe_of(acme, alice, two_studies[:2], members_as="existing", register_as="iris-blend")
    first = recipe_run_now(recipe=recipe, user=alice)
    second = recipe_run_start(recipe=recipe, user=alice, trigger="study_completed", trigger_key="study:1")
    assert first.status == second.status == Status.BUILDING  # nothing registered yet when both started
    for run in (first, second):
        labels = [str(m.model) for m in run.ensemble.members.order_by("position")]
        finish(run.ensemble, val_loss=0.2, report=ensemble_report(labels, weights=[0.6, 0.4]))
        run.refresh_from_db()
    assert first.registered.version == 1 and second.registered is None
    assert second.comparison["verdict"] == ("same members, method and inputs as v1 (the last version): "
                                            "nothing registered")
    assert ModelVersion.objects.count() == 1


def test_equal_means_same_members_method_options_and_dataset(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    recipe = recipe_of(acme, alice, two_studies[:2], members_as="existing", register_as="iris-blend",
                       alias="production", method="greedy", greedy_rounds=30)
    run = build_run(recipe, alice, 0.2, weights=[0.6, 0.4])
    members = run.members

    def twin(keys=None, **changes):
        EnsembleRecipe.objects.filter(pk=recipe.pk).update(**{"method": "greedy", "greedy_rounds": 30,
                                                              "correlation_cap": None, **changes})
        recipe.refresh_from_db()
        found = registered_twin(recipe=recipe, members=members if keys is None else keys)
        return found and found.version.version

    assert twin() == 1
    assert twin(list(reversed(members))) == 1  # the order of members does not change the fit
    assert twin(members[:1]) is None and twin([*members, "trial:1"]) is None
    assert twin(method="nelder_mead") is None
    assert twin(greedy_rounds=31) is None
    assert twin(correlation_cap=0.9) is None
    assert twin(register_as="another-name") is None
    assert twin([members[0], "retrain:1"]) is None  # a retrain still to request is a new model
