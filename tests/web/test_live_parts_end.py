"""The live parts of the study, model and recipe pages and the serving panel poll while something
is in progress and render once more when it ends: the fragment of a finished job has no polling
attribute and none of the in-progress pieces (cancel buttons, progress text, the budget form of a
completed study), and brings what the end makes possible (a model's Register form and Predict
box), so nothing stale stays on the page without a reload. Another team's are 404."""

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import EnsembleRecipe, RecipeRun, RegisteredModel, ServingExport, Study, TrainedModel, Trial
from experiments.services.trained_models import trained_models_request
from tests.web.figures_rows import finished_model, finished_trial
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def _live(client, study, seen=None):
    url = reverse("study_live", args=[study.id]) + (f"?seen={seen}" if seen else "")
    return page_text(client.get(url, **HTMX))


def _live_section(fragment: str, element_id: str) -> str:
    return fragment.split(f'id="{element_id}"', 1)[1].split(">", 1)[0]


def test_a_running_study_polls_and_shows_its_running_pieces(alice_client, acme_running_study):
    Trial.objects.create(study=acme_running_study, trial_id="0", number=1, status=Trial.Status.RUNNING)
    fragment = _live(alice_client, acme_running_study, "running")
    assert 'hx-trigger="every 2s"' in _live_section(fragment, "study-live")
    assert 'id="cancel-study"' in fragment and 'id="running-trials"' in fragment


def test_the_fragment_after_a_study_ends_has_no_polling_and_no_running_pieces(alice_client, acme_running_study):
    study = acme_running_study
    finished_trial(study, 1)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, finished=timezone.now())
    study.refresh_from_db()
    fragment = _live(alice_client, study, "running")
    section = _live_section(fragment, "study-live")
    assert "hx-trigger" not in section and "hx-get" not in section
    for piece in ('id="cancel-study"', 'id="running-trials"', 'id="eta"', 'id="no-live-worker"', "Waiting for a"):
        assert piece not in fragment, piece
    # Out of band: the budget form goes, the models section (with the retrain form) comes.
    assert '<div id="budget" hidden hx-swap-oob="true"></div>' in fragment
    assert 'id="study-models" hx-swap-oob="true"' in fragment and 'id="model-request-form"' in fragment
    # The page loaded after the end has neither the budget form nor a poller.
    page = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    assert "Change max trials, parallelism or priority" not in page
    assert "hx-trigger" not in _live_section(page, "study-live")


def test_a_cancelled_study_polls_until_its_running_trials_have_stopped(alice_client, acme_running_study):
    study = acme_running_study
    running = Trial.objects.create(study=study, trial_id="0", number=1, status=Trial.Status.RUNNING)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CANCELLED)
    study.refresh_from_db()
    fragment = _live(alice_client, study, "running")
    assert 'hx-trigger="every 2s"' in _live_section(fragment, "study-live")
    assert "?seen=cancelled" in _live_section(fragment, "study-live")
    assert "Change max trials, parallelism or priority" in fragment  # still resizable, and resumable
    Trial.objects.filter(pk=running.pk).update(status=Trial.Status.CANCELLED)
    fragment = _live(alice_client, study, "cancelled")
    assert "hx-trigger" not in _live_section(fragment, "study-live") and 'id="running-trials"' not in fragment
    assert 'hx-swap-oob="true"' in fragment and 'id="study-models-list"' in fragment  # only the list, not the form
    assert 'id="budget"' not in fragment


def test_a_finished_study_polls_while_its_models_are_built_and_then_stops(
        alice_client, acme, alice, acme_study, acme_trial):
    Study.objects.filter(pk=acme_study.pk).update(status=Study.Status.COMPLETED)
    acme_study.refresh_from_db()
    (model,) = trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain")
    fragment = _live(alice_client, acme_study, "completed")
    assert 'hx-trigger="every 2s"' in _live_section(fragment, "study-live")
    assert "Queued</span>" in fragment.split('id="study-models-list" hx-swap-oob="true"')[1]
    TrainedModel.objects.filter(pk=model.pk).update(status=TrainedModel.Status.COMPLETED)
    fragment = _live(alice_client, acme_study, "completed")
    assert "hx-trigger" not in _live_section(fragment, "study-live")
    assert "Completed</span>" in fragment.split('id="study-models-list" hx-swap-oob="true"')[1]


def test_the_model_fragment_after_the_job_ends_has_no_cancel_button_progress_or_polling(
        alice_client, acme_study, acme_trial, alice):
    (model,) = trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain")
    url = reverse("model_live", args=[model.id])
    running = page_text(alice_client.get(url, **HTMX))
    assert 'hx-trigger="every 2s"' in _live_section(running, "model-live")
    assert 'id="cancel-model"' in running and "waiting for a worker…" in running
    TrainedModel.objects.filter(pk=model.pk).update(status=TrainedModel.Status.COMPLETED, best_epoch=2, epochs=2,
                                                    test_metrics={"accuracy": 0.9}, finished=timezone.now())
    done = page_text(alice_client.get(url, **HTMX))
    assert "hx-trigger" not in _live_section(done, "model-live") and "hx-get" not in _live_section(done, "model-live")
    assert 'id="cancel-model"' not in done and 'id="model-progress"' not in done
    assert 'id="model-metrics"' in done and 'id="downloads"' in done


def test_a_saved_ensemble_is_announced_in_words_that_stay_true(alice_client, acme, alice, acme_study, acme_trial):
    members = [finished_model(acme, alice, acme_study, acme_trial, name="m", version=v) for v in (1, 2)]
    response = alice_client.post(reverse("ensemble_new"), {"members": [f"model:{m.id}" for m in members],
                                                          "method": "mean", "name": "pair"}, follow=True)
    page = page_text(response)
    assert "Saved the ensemble pair v1." in page and "Building" not in page
    assert "building the ensemble" not in page and "waiting for a worker…" in page  # queued: the live part says so


def test_the_model_fragment_brings_register_and_predict_once_when_the_job_ends(
        alice_client, acme_study, acme_trial, alice):
    (model,) = trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain")
    url = reverse("model_live", args=[model.id])
    running = page_text(alice_client.get(url + "?seen=queued", **HTMX))
    assert "?seen=queued" in _live_section(running, "model-live")
    assert 'id="model-ready"' not in running and 'id="register-form"' not in running
    TrainedModel.objects.filter(pk=model.pk).update(status=TrainedModel.Status.COMPLETED, best_epoch=2, epochs=2,
                                                    test_metrics={"accuracy": 0.9}, finished=timezone.now())
    ended = page_text(alice_client.get(url + "?seen=running", **HTMX))
    assert 'id="model-ready" hx-swap-oob="true"' in ended
    assert 'id="register-form"' in ended and 'id="model-predictions"' in ended
    # Once only: a later refresh (a conversion still running) leaves what the user typed alone.
    assert 'id="model-ready"' not in page_text(alice_client.get(url + "?seen=completed", **HTMX))


@pytest.fixture
def acme_recipe(acme, alice, acme_dataset, acme_study):
    recipe = EnsembleRecipe.objects.create(team=acme, name="blend", dataset=acme_dataset, created_by=alice)
    recipe.source_studies.set([acme_study])
    return recipe


def test_the_recipe_runs_poll_while_a_run_waits_or_builds_and_stop_when_it_ends(alice_client, acme_recipe):
    run = RecipeRun.objects.create(recipe=acme_recipe, number=1, trigger="manual", status=RecipeRun.Status.WAITING)
    live = reverse("recipe_runs_live", args=[acme_recipe.id])
    page = page_text(alice_client.get(reverse("recipe_detail", args=[acme_recipe.id])))
    assert f'hx-get="{live}"' in _live_section(page, "recipe-runs")
    for status in (RecipeRun.Status.WAITING, RecipeRun.Status.BUILDING):
        RecipeRun.objects.filter(pk=run.pk).update(status=status)
        fragment = page_text(alice_client.get(live, **HTMX))
        assert 'hx-trigger="every 2s"' in _live_section(fragment, "recipe-runs")
        assert f'data-status="{status}"' in fragment
    RecipeRun.objects.filter(pk=run.pk).update(status=RecipeRun.Status.COMPLETED, finished=timezone.now())
    fragment = page_text(alice_client.get(live, **HTMX))
    assert "hx-trigger" not in _live_section(fragment, "recipe-runs") and 'data-status="completed"' in fragment
    assert "<html" not in fragment  # the part alone, not the page


def test_the_serving_panel_polls_while_an_export_waits_or_runs_and_stops_when_it_ends(alice_client, acme):
    registered = RegisteredModel.objects.create(team=acme, name="digits", task="classification", dataset_kind="image")
    export = ServingExport.objects.create(team=acme, reason="manual")
    page = page_text(alice_client.get(reverse("registry_detail", args=[registered.id])))
    live = reverse("registry_serving_live") + f"?registered={registered.id}"
    assert f'hx-get="{live}"' in _live_section(page, "serving")
    ServingExport.objects.filter(pk=export.pk).update(status=ServingExport.Status.RUNNING, worker_host="w")
    fragment = page_text(alice_client.get(live, **HTMX))
    assert 'hx-trigger="every 2s"' in _live_section(fragment, "serving") and 'data-status="running"' in fragment
    # The registered model's page: its REST line, and Export now leads back to that page.
    assert "/v1/models/digits/labels/production:predict" in fragment
    assert f'name="next" value="{reverse("registry_detail", args=[registered.id])}"' in fragment
    ServingExport.objects.filter(pk=export.pk).update(status=ServingExport.Status.COMPLETED, finished=timezone.now())
    fragment = page_text(alice_client.get(reverse("registry_serving_live"), **HTMX))
    assert "hx-trigger" not in _live_section(fragment, "serving") and 'data-status="completed"' in fragment
    assert f'name="next" value="{reverse("registry_serving")}"' in fragment


def test_another_team_gets_404_for_acmes_registered_model_in_the_serving_panel(client, charlie, globex, acme):
    registered = RegisteredModel.objects.create(team=acme, name="digits", task="classification", dataset_kind="image")
    ServingExport.objects.create(team=acme, reason="manual")
    client.force_login(charlie)
    live = reverse("registry_serving_live")
    for value in (registered.id, "x", "٣", ""):
        assert client.get(live, {"registered": value}, **HTMX).status_code == 404, value
    own = page_text(client.get(live, **HTMX))  # its own panel: its folder, none of acme's export
    assert f"team-{globex.pk}" in own and f"team-{acme.pk}" not in own and "Not exported yet." in own


def test_a_recipe_triggered_by_studies_keeps_looking_for_new_runs_on_an_open_page(alice_client, acme_recipe):
    """A study's completion may start a run while the page is open: it appears without a reload."""
    live = reverse("recipe_runs_live", args=[acme_recipe.id])
    assert "hx-trigger" not in _live_section(page_text(alice_client.get(live, **HTMX)), "recipe-runs")  # on demand
    EnsembleRecipe.objects.filter(pk=acme_recipe.pk).update(trigger=EnsembleRecipe.Trigger.STUDY_COMPLETED)
    assert 'hx-trigger="every 15s"' in _live_section(page_text(alice_client.get(live, **HTMX)), "recipe-runs")
    RecipeRun.objects.create(recipe=acme_recipe, number=1, trigger="study:1", status=RecipeRun.Status.WAITING)
    fragment = page_text(alice_client.get(live, **HTMX))
    assert 'hx-trigger="every 2s"' in _live_section(fragment, "recipe-runs") and 'data-status="waiting"' in fragment
