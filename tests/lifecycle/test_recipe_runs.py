"""Recipe runs in this process against PostgreSQL, no worker: starts (refusals, idempotent
trigger keys), waiting for retrains, the ensemble's completion simulated with model_complete
(comparison, collapse, champion/challenger), and the triggers (study completion, new candidates)."""


import threading

import pytest
from django.db import connection

from experiments.models import EnsembleRecipe, ModelAlias, RecipeRun, Study, TrainedModel
from experiments.services import jobs, trained_models
from experiments.services.job_kinds import JOB_KINDS
from experiments.services.recipe_runs import RecipeRunError, recipe_run_start
from tests.lifecycle.recipe_rows import trial

pytestmark = pytest.mark.django_db
Status = RecipeRun.Status
SIGNATURE = {"keras": {"inputs": [{"shape": [None, 4], "dtype": "float32"}]}}


def recipe_of(acme, alice, studies, **options):
    recipe = EnsembleRecipe.objects.create(team=acme, name=options.pop("name", "blend"), dataset=studies[0].dataset,
                                           created_by=alice, acts_for=alice, **options)
    recipe.source_studies.set(studies)
    return recipe


def finish(model, val_loss=0.1, report=None, members=None):
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="w").attempts
    assert trained_models.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"loss": val_loss}, test_metrics={"loss": val_loss + 0.05},
                                     signature=SIGNATURE, versions={}, files={}, duration_seconds=1.0,
                                     report=report, members=members)


def fail(model, error="out of memory"):
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="w").attempts
    assert jobs.job_fail(kind=JOB_KINDS["models"], pk=model.pk, attempt=attempt, error=error)


def test_a_run_picks_one_per_hypermodel_and_waits_for_the_retrains(acme, alice, two_studies):
    dense, other, trials = two_studies
    recipe = recipe_of(acme, alice, [dense, other])
    run = recipe_run_start(recipe=recipe, user=alice)
    assert run.number == 1 and run.status == Status.WAITING
    picked = [c for c in run.candidates if c["picked"]]
    assert [c["trial_id"] for c in picked] == [trials[1].id, trials[2].id]  # best of each hypermodel, best first
    retrains = list(run.waiting_on.order_by("trial__study_id"))
    assert [m.trial_id for m in retrains] == [trials[1].id, trials[2].id]
    assert all(m.method == TrainedModel.Method.RETRAIN for m in retrains)
    assert run.members == [f"model:{m.pk}" for m in sorted(retrains, key=lambda m: m.trial_id != trials[1].id)]
    assert run.rule["top_k"] == 3 and run.rule["fingerprint"]
    # A second run (a trigger's: Run now waits for the first to end) reuses the retrains still
    # queued instead of training the same trials again.
    again = recipe_run_start(recipe=recipe, user=alice, trigger="study_completed", trigger_key="study:0")
    assert again.number == 2 and set(again.waiting_on.all()) == set(retrains)


def test_fewer_than_two_picks_is_refused_and_nothing_is_saved(acme, alice, two_studies):
    dense, _, _ = two_studies
    recipe = recipe_of(acme, alice, [dense])  # one hypermodel, one per hypermodel
    with pytest.raises(RecipeRunError, match="Only 1 candidate is picked today: dense-search trial 2"):
        recipe_run_start(recipe=recipe, user=alice)
    assert not RecipeRun.objects.exists() and not TrainedModel.objects.exists()


def test_a_trigger_key_starts_one_run_and_a_duplicate_creates_nothing(acme, alice, two_studies):
    recipe = recipe_of(acme, alice, two_studies[:2])
    first = recipe_run_start(recipe=recipe, user=alice, trigger="study_completed", trigger_key="study:1")
    assert first is not None
    assert recipe_run_start(recipe=recipe, user=alice, trigger="study_completed", trigger_key="study:1") is None
    assert RecipeRun.objects.count() == 1 and TrainedModel.objects.count() == 2


def test_the_run_builds_once_when_its_last_retrain_completes(acme, alice, two_studies):
    recipe = recipe_of(acme, alice, two_studies[:2], correlation_cap=0.95, method="greedy", greedy_rounds=20)
    run = recipe_run_start(recipe=recipe, user=alice)
    first, second = (TrainedModel.objects.get(pk=key.split(":")[1]) for key in run.members)
    finish(first)
    run.refresh_from_db()
    assert run.status == Status.WAITING and run.ensemble is None
    finish(second)
    run.refresh_from_db()
    assert run.status == Status.BUILDING
    ensemble = run.ensemble
    assert ensemble.is_ensemble and ensemble.method == "greedy" and ensemble.greedy_rounds == 20
    assert ensemble.name == "recipe-blend" and ensemble.status == TrainedModel.Status.QUEUED
    assert [m.model_id for m in ensemble.members.order_by("position")] == [first.pk, second.pk]
    assert ensemble.report == {"correlation_cap": 0.95, "recipe_run": run.id}
    # A finished model heard again (another path, a duplicate) builds nothing more.
    from experiments.services.recipe_runs import recipe_runs_on_model_finished
    recipe_runs_on_model_finished(model_pk=second.pk, status="completed")
    assert TrainedModel.objects.filter(kind=TrainedModel.Kind.ENSEMBLE).count() == 1


def test_a_failed_retrain_fails_the_run_with_its_reason(acme, alice, two_studies):
    run = recipe_run_start(recipe=recipe_of(acme, alice, two_studies[:2]), user=alice)
    first, second = (TrainedModel.objects.get(pk=key.split(":")[1]) for key in run.members)
    fail(first, "out of memory")
    run.refresh_from_db()
    assert run.status == Status.FAILED and run.finished is not None
    assert "out of memory" in run.error and str(first) in run.error
    finish(second)  # the other retrain is kept, and the failed run stays failed
    run.refresh_from_db()
    second.refresh_from_db()
    assert run.status == Status.FAILED and second.status == TrainedModel.Status.COMPLETED


def _existing_models(two_studies, alice):
    """One finished retrain per picked trial: members_as=existing builds at once."""
    from experiments.services.trained_models import trained_models_request
    _, _, trials = two_studies
    models = []
    for t in (trials[1], trials[2]):
        (model,) = trained_models_request(study=t.study, user=alice, trials=[t], method="retrain")
        finish(model, val_loss=0.3)
        models.append(model)
    return models


def ensemble_report(labels, weights, correlation=0.5, val=(0.10, 0.20, 0.15), fit=None):
    ensemble, best, mean = val
    both = lambda v: {"val": {"loss": v, "accuracy": 0.9}, "test": {"loss": v + 0.05, "accuracy": 0.88}}  # noqa: E731
    return {"method": "nelder_mead", "weights": weights, "members": labels,
            "dropped_members": [label for label, w in zip(labels, weights, strict=True) if w == 0],
            "comparison": {"ensemble": both(ensemble), "mean": both(mean),
                           "best_member": {"label": labels[0], "weight": weights[0], **both(best)}},
            "correlation": [[1.0 if i == j else correlation for j in labels] for i in labels], "fit": fit or {}}


def build_run(recipe, alice, val_loss, method=None, **report):
    if method is not None:  # the same members by another method: another ensemble, not the champion again
        EnsembleRecipe.objects.filter(pk=recipe.pk).update(method=method)
    run = recipe_run_start(recipe=recipe, user=alice)
    assert run.status == Status.BUILDING
    labels = [str(m.model) for m in run.ensemble.members.order_by("position")]
    finish(run.ensemble, val_loss=val_loss, report=ensemble_report(labels, **report))
    run.refresh_from_db()
    return run


def test_champion_challenger_moves_the_alias_only_when_better(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    recipe = recipe_of(acme, alice, two_studies[:2], members_as="existing", register_as="digits-blend",
                       alias="production")
    first = build_run(recipe, alice, 0.20, weights=[0.6, 0.4])
    assert first.status == Status.COMPLETED and first.promoted and first.registered.version == 1
    c = first.comparison
    assert (c["verdict"], c["champion"], c["challenger_val"]) == ("first version", None, 0.20)
    assert c["metric"] == "loss" and c["ensemble"]["val"] == 0.10 and c["best_member"]["val"] == 0.20
    assert c["mean"]["test"] == pytest.approx(0.20) and c["collapsed"] is False
    assert c["changes"]["added"] == ["dense-search trial 2", "other-search trial 1"]
    alias = ModelAlias.objects.get(name="production")
    assert alias.version.version == 1

    worse = build_run(recipe, alice, 0.25, method="greedy", weights=[0.6, 0.4])
    assert worse.status == Status.COMPLETED and worse.registered.version == 2 and not worse.promoted
    assert worse.comparison["verdict"] == "kept the champion"
    assert worse.comparison["champion"] == {"version": 1, "val": 0.20}
    assert worse.comparison["rule"] == ("moves production only when validation loss is lower than the current "
                                        "version's (0.2); a stacked ensemble counts its cross-validated loss")
    assert worse.comparison["changes"] == {"added": [], "removed": [], "previous_run": 1}
    assert ModelAlias.objects.get(name="production").version.version == 1

    better = build_run(recipe, alice, 0.15, method="mean", weights=[0.6, 0.4])
    assert better.promoted and better.comparison["verdict"] == "promoted"
    assert better.comparison["champion"] == {"version": 1, "val": 0.20}
    assert ModelAlias.objects.get(name="production").version.version == 3

    # A stacked champion is judged by its cross-validated loss, not its in-sample refit's 0.01.
    stacked = build_run(recipe, alice, 0.01, method="stacking", weights=[0.6, 0.4],
                        fit={"val_loss_in_sample": True, "cv_loss": 0.14})
    assert stacked.promoted and stacked.comparison["challenger_val"] == 0.14
    EnsembleRecipe.objects.filter(pk=recipe.pk).update(greedy_rounds=20)  # greedy again, with other options
    fair = build_run(recipe, alice, 0.12, method="greedy", weights=[0.6, 0.4])
    assert fair.promoted and fair.comparison["champion"] == {"version": 4, "val": 0.14}
    assert ModelAlias.objects.get(name="production").version.version == 5


def test_a_run_whose_weights_sit_on_one_member_reports_the_collapse(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    recipe = recipe_of(acme, alice, two_studies[:2], members_as="existing")
    run = build_run(recipe, alice, 0.2, weights=[1.0, 0.0], correlation=0.998, val=(0.2, 0.2, 0.21))
    c = run.comparison
    assert c["collapsed"] is True and c["verdict"] == "not registered" and not run.registered
    assert "members too alike: correlation 0.998 between" in c["collapsed_reason"]


def test_a_failed_ensemble_fails_the_run(acme, alice, two_studies):
    _existing_models(two_studies, alice)
    run = recipe_run_start(recipe=recipe_of(acme, alice, two_studies[:2], members_as="existing"), user=alice)
    fail(run.ensemble, "The members' outputs differ in shape")
    run.refresh_from_db()
    assert run.status == Status.FAILED and "differ in shape" in run.error


def completed(study):
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)


def test_a_study_completion_heard_twice_starts_one_run(acme, alice, two_studies, make_study):
    from experiments.services.recipe_triggers import recipes_on_study_completed
    dense, other, _ = two_studies
    recipe = recipe_of(acme, alice, [dense, other], trigger="study_completed")
    manual = recipe_of(acme, alice, [dense, other], name="by-hand")  # another trigger: not started
    unrelated = recipe_of(acme, alice, [other, make_study(name="third")], name="elsewhere",
                          trigger="study_completed")
    completed(dense)
    recipes_on_study_completed(study_id=dense.id)
    recipes_on_study_completed(study_id=dense.id)  # the completion path ran twice / was delivered twice
    (run,) = RecipeRun.objects.all()
    assert (run.recipe, run.trigger, run.trigger_key) == (recipe, "study_completed", f"study:{dense.id}")
    assert "dense-search completed" in run.reason
    assert not manual.runs.exists() and not unrelated.runs.exists()
    # The other source's completion is another event: one more run.
    completed(other)
    recipes_on_study_completed(study_id=other.id)
    assert recipe.runs.count() == 2 and unrelated.runs.count() == 0  # unrelated has one pick only: no run


def test_a_recipe_that_cannot_run_never_breaks_the_completion(acme, alice, make_study):
    from experiments.services.recipe_triggers import recipes_on_study_completed
    study = make_study(name="lonely")
    trial(study, 1, 0.3)
    recipe_of(acme, alice, [study], trigger="study_completed")
    completed(study)
    recipes_on_study_completed(study_id=study.id)  # one pick: logged, no run, no exception
    assert not RecipeRun.objects.exists()


def test_new_candidates_start_a_run_once_per_picked_set(acme, alice, two_studies):
    from experiments.services.recipe_triggers import recipes_on_new_candidate
    dense, other, _ = two_studies
    recipe = recipe_of(acme, alice, [dense, other], trigger="new_candidate")
    recipes_on_new_candidate(study_id=dense.id)
    recipes_on_new_candidate(study_id=other.id)  # same picked set: nothing new
    (first,) = recipe.runs.all()
    assert first.trigger_key == f"candidates:{first.rule['fingerprint']}"
    better = trial(dense, 3, 0.05)
    recipes_on_new_candidate(study_id=dense.id)
    second = recipe.runs.get(number=2)
    assert second.rule["fingerprint"] != first.rule["fingerprint"]
    assert better.id in [c["trial_id"] for c in second.candidates if c["picked"]]
    recipes_on_new_candidate(study_id=dense.id)
    assert recipe.runs.count() == 2


def test_the_completion_signal_starts_the_run_after_the_commit(acme, alice, two_studies,
                                                               django_capture_on_commit_callbacks):
    from experiments.signals import study_completed
    dense, other, _ = two_studies
    recipe = recipe_of(acme, alice, [dense, other], trigger="study_completed", members_as="checkpoint")
    completed(dense)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        study_completed.send(sender=Study, study_id=dense.id)
        study_completed.send(sender=Study, study_id=dense.id)
    assert not recipe.runs.exists()  # nothing before the commit
    for callback in callbacks:
        callback()
    # Checkpoint members but no checkpoint kept: no pick, so no run, and no error either.
    assert not recipe.runs.exists()
    recipe.members_as = "retrained"
    recipe.save()
    for callback in callbacks:
        callback()
    assert recipe.runs.count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_racing_start_one_run(acme, alice, two_studies):
    from experiments.services.recipe_triggers import recipes_on_study_completed
    dense, other, _ = two_studies
    recipe = recipe_of(acme, alice, [dense, other], trigger="study_completed")
    completed(dense)
    barrier, errors = threading.Barrier(2), []

    def deliver():
        try:
            barrier.wait()
            recipes_on_study_completed(study_id=dense.id)
        except Exception as exc:  # pragma: no cover - shown in the assertion
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert recipe.runs.count() == 1 and TrainedModel.objects.filter(method="retrain").count() == 2


def test_the_correlation_cap_gives_members_too_alike_to_a_better_one_weight_zero():
    import numpy as np

    from workers.ensembles.correlation_cap import correlation_cap
    rng = np.random.default_rng(0)
    best = rng.random((50, 3))
    val = np.stack([best, best + 0.001 * rng.random((50, 3)), rng.random((50, 3))])
    cap = correlation_cap({"correlation_cap": 0.9, "recipe_run": 1}, val, ["a v1", "b v1", "c v1"])
    assert cap.kept == [0, 2] and cap.method("greedy") == "greedy"
    assert cap.reasons == {"b v1": "too alike to a v1 (r=1.00)"}
    assert cap.spread(np.array([0.7, 0.3])).tolist() == [0.7, 0.0, 0.3]
    assert cap.report() == {"correlation_cap": 0.9, "dropped_reasons": cap.reasons}
    alone = correlation_cap({"correlation_cap": 0.9}, val[:2], ["a v1", "b v1"])
    assert alone.kept == [0] and alone.method("nelder_mead") == "mean"
    uncapped = correlation_cap({}, val, ["a", "b", "c"])
    assert uncapped.kept == [0, 1, 2] and uncapped.report() == {}


def test_the_collapse_rule_on_constructed_reports():
    from experiments.services.recipe_outcomes import collapse
    labels = ["a v1", "b v1", "c v1"]
    correlation = [[1.0, 0.998, 0.97], [0.998, 1.0, 0.96], [0.97, 0.96, 1.0]]
    assert collapse({"weights": [0.5, 0.3, 0.2], "members": labels, "correlation": correlation}) == (False, "")
    collapsed, why = collapse({"weights": [0.9995, 0.0005, 0.0], "members": labels, "correlation": correlation})
    assert collapsed and why.startswith("members too alike: correlation 0.998 between a v1 and b v1, so the fit")
    capped, why = collapse({"weights": [1.0, 0.0, 0.0], "members": labels, "correlation": correlation,
                            "correlation_cap": 0.9, "dropped_reasons": {"b v1": "too alike to a v1 (r=1.00)"}})
    assert capped and "the recipe's correlation cap (0.9) left only a v1" in why
    weaker, why = collapse({"weights": [1.0, 0.0], "members": labels[:2], "correlation": [[1.0, 0.8], [0.8, 1.0]]})
    assert weaker and why.startswith("the other members are weaker than a v1") and "too alike" not in why


def test_a_cancelled_retrain_fails_the_run(acme, alice, two_studies):
    run = recipe_run_start(recipe=recipe_of(acme, alice, two_studies[:2]), user=alice)
    first = TrainedModel.objects.get(pk=run.members[0].split(":")[1])
    trained_models.model_cancel(model=first)
    run.refresh_from_db()
    assert run.status == Status.FAILED and "cancelled: Cancelled by a user." in run.error
