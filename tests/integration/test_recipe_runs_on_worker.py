"""Ensemble recipes on a real worker: a recipe over two studies of one dataset with different
hypermodels picks at most one per hypermodel, starts by itself when its last source study
completes (once, however often the completion is heard), and its ensemble is no worse than its
best member on validation; the same kind of recipe over the top 3 of one search, with a
correlation cap, collapses to one member and says why; members as retrained wait for their
retrains, then register and promote (audited in the worker with the member the run acts for and
the recipe), and running it again with the same members builds and registers nothing. About a
minute on two CPU cores."""

import pytest

from experiments.models import AuditEvent, EnsembleMember, EnsembleRecipe, ModelAlias, ModelVersion, RecipeRun, Study
from experiments.services.recipe_runs import recipe_run_start
from experiments.services.recipe_triggers import recipes_on_study_completed
from experiments.services.studies import study_start
from tests.conftest import wait_for
from tests.integration.helpers import digits, saved_study, started_study

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _fixed(name, value):
    return {"name": name, "type": "fixed", "value": value, "parent": None, "parent_values": []}


# Three nearly identical configurations of one hypermodel: the top 3 of one search.
DENSE_SPACE = [_fixed("units", 32), _fixed("num_layers", 1),
               {"name": "learning_rate", "type": "choice", "values": [0.008, 0.01, 0.012], "ordered": True,
                "parent": None, "parent_values": []}]
TINY_SPACE = [_fixed("units", 8),
              {"name": "learning_rate", "type": "choice", "values": [0.02, 0.05], "ordered": True,
               "parent": None, "parent_values": []}]


def _recipe(acme, alice, name, sources, **options):
    options = {"members_as": "checkpoint", "method": "nelder_mead", **options}
    recipe = EnsembleRecipe.objects.create(team=acme, name=name, dataset=sources[0].dataset, created_by=alice,
                                           acts_for=alice, **options)
    recipe.source_studies.set(sources)
    return recipe


def _finished(obj, worker, active, what):
    def done():
        obj.refresh_from_db()
        return not active(obj)

    wait_for(done, timeout=300, what=f"{what}:\n{worker.log()[-3000:]}")


def test_recipes_on_a_real_worker(acme, alice, start_worker):
    worker = start_worker()
    data = digits(acme, alice)
    dense = started_study(acme, alice, data, name="dense-search", hypermodel="dense", search_space=DENSE_SPACE,
                          tuner="grid", max_trials=3, epochs=6, batch_size=32)
    tiny = saved_study(acme, alice, data, name="tiny-search", search_space=TINY_SPACE, tuner="grid", max_trials=2,
                       epochs=4, batch_size=32)
    diverse = _recipe(acme, alice, "diverse", [dense, tiny], top_k=2, per_group_max=1, trigger="study_completed")
    alike = _recipe(acme, alice, "alike", [dense], top_k=3, per_group_max=3, correlation_cap=0.9)

    _finished(dense, worker, lambda s: s.status == Study.Status.RUNNING, "the dense search")
    assert dense.status == Study.Status.COMPLETED, dense.message
    # Only the dense search has results yet: one pick, so its completion started no run.
    assert not diverse.runs.exists()

    collapsed = recipe_run_start(recipe=alike, user=alice)
    assert collapsed.status == RecipeRun.Status.BUILDING
    study_start(study=tiny)
    _finished(tiny, worker, lambda s: s.status == Study.Status.RUNNING, "the tiny search")
    assert tiny.status == Study.Status.COMPLETED, tiny.message

    wait_for(lambda: diverse.runs.exists(), timeout=30, what="the completion to start a run")
    recipes_on_study_completed(study_id=tiny.id)  # heard again: nothing more
    (run,) = diverse.runs.all()
    assert (run.trigger, run.trigger_key) == ("study_completed", f"study:{tiny.id}")
    picked = [c for c in run.candidates if c["picked"]]
    assert sorted(c["hypermodel"] for c in picked) == ["dense", "tiny"]  # at most one per hypermodel
    assert {c["why"] for c in run.candidates if not c["picked"]} == {"hypermodel dense already has 1",
                                                                     "hypermodel tiny already has 1"}

    for each in (run, collapsed):
        _finished(each, worker, lambda r: r.status in (RecipeRun.Status.WAITING, RecipeRun.Status.BUILDING),
                  f"recipe run {each}")
        assert each.status == RecipeRun.Status.COMPLETED, each.error or each.ensemble.error

    c = run.comparison
    weights = list(EnsembleMember.objects.filter(ensemble=run.ensemble).values_list("weight", flat=True))
    # Seeded: two hypermodels blend to a lower validation loss than the better one alone.
    assert c["ensemble"]["val"] < c["best_member"]["val"], (c, weights)
    assert all(w > 0 for w in weights) and c["ensemble"]["val"] < c["mean"]["val"]
    assert c["collapsed"] is False and c["changes"]["added"] and c["verdict"] == "not registered"

    c = collapsed.comparison
    report = collapsed.ensemble.report
    assert c["collapsed"] is True and "members too alike: correlation" in c["collapsed_reason"]
    assert len(report["dropped_reasons"]) == 2 and all("too alike to" in r for r in report["dropped_reasons"].values())
    assert sorted(report["weights"]) == [0.0, 0.0, 1.0]

    # Members as retrained: the run waits for the two retrains it requested, builds once both
    # are done, registers the ensemble and, as the first version, moves the alias to it.
    promoted = _recipe(acme, alice, "retrained", [dense, tiny], top_k=1, members_as="retrained", method="greedy",
                       greedy_rounds=10, register_as="digits-blend", alias="production")
    waiting = recipe_run_start(recipe=promoted, user=alice)
    assert waiting.status == RecipeRun.Status.WAITING and waiting.waiting_on.count() == 2
    _finished(waiting, worker, lambda r: r.status in (RecipeRun.Status.WAITING, RecipeRun.Status.BUILDING),
              "the retrained recipe run")
    assert waiting.status == RecipeRun.Status.COMPLETED, waiting.error or waiting.ensemble.error
    assert [m.model.method for m in waiting.ensemble.members.all()] == ["retrain", "retrain"]
    assert waiting.promoted and waiting.registered.version == 1
    assert waiting.comparison["verdict"] == "first version"
    assert ModelAlias.objects.get(name="production").version == waiting.registered
    # Registered and promoted in the worker, outside any request: audited as alice's, by the recipe.
    rows = AuditEvent.objects.filter(verb__startswith="registry.").order_by("id")
    assert [(r.verb, r.actor_id, r.changes["recipe"]) for r in rows] == [
        ("registry.register", alice.id, "retrained"), ("registry.alias_set", alice.id, "retrained")]
    # Again with the same members (the retrains now finished): nothing built, nothing registered.
    again = recipe_run_start(recipe=promoted, user=alice)
    assert again.status == RecipeRun.Status.COMPLETED and again.ensemble is None
    assert again.comparison["verdict"] == ("same members, method and inputs as v1 (the champion): nothing "
                                           "registered")
    assert ModelVersion.objects.count() == 1
