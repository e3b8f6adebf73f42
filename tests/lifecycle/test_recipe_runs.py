"""Recipe runs in this process against PostgreSQL, no worker: starts (refusals, idempotent
trigger keys), waiting for retrains, the ensemble's completion simulated with model_complete
(comparison, collapse, champion/challenger), and the triggers (study completion, new candidates)."""


import pytest

from experiments.models import EnsembleRecipe, RecipeRun, Study, TrainedModel, Trial
from experiments.services import model_runs
from experiments.services.recipe_runs import RecipeRunError, recipe_run_start

pytestmark = pytest.mark.django_db
Status = RecipeRun.Status
SIGNATURE = {"keras": {"inputs": [{"shape": [None, 4], "dtype": "float32"}]}}


def trial(study, number, loss, **fields):
    return Trial.objects.create(study=study, trial_id=str(number - 1), number=number, status=Trial.Status.COMPLETED,
                                hyperparameters={"units": 8}, score=0.9, best_epoch=2,
                                metrics={"val_loss": loss, "val_accuracy": 0.9}, **fields)


@pytest.fixture
def two_studies(make_study):
    """Two studies of one dataset with different hypermodels, two trials each."""
    dense = make_study(name="dense-search")
    other = make_study(name="other-search")
    Study.objects.filter(pk=other.pk).update(hypermodel="other")
    other.refresh_from_db()
    trials = [trial(dense, 1, 0.30), trial(dense, 2, 0.20), trial(other, 1, 0.25), trial(other, 2, 0.40)]
    return dense, other, trials


def recipe_of(acme, alice, studies, **options):
    recipe = EnsembleRecipe.objects.create(team=acme, name=options.pop("name", "blend"), dataset=studies[0].dataset,
                                           created_by=alice, **options)
    recipe.source_studies.set(studies)
    return recipe


def finish(model, val_loss=0.1, report=None, members=None):
    attempt = model_runs.model_claim(model_pk=model.pk, worker_host="w").attempts
    assert model_runs.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"loss": val_loss}, test_metrics={"loss": val_loss + 0.05},
                                     signature=SIGNATURE, versions={}, files={}, duration_seconds=1.0,
                                     report=report, members=members)


def fail(model, error="out of memory"):
    attempt = model_runs.model_claim(model_pk=model.pk, worker_host="w").attempts
    assert model_runs.model_fail(model_pk=model.pk, attempt=attempt, error=error)


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
    # A second run reuses the retrains still queued instead of training the same trials again.
    again = recipe_run_start(recipe=recipe, user=alice)
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
