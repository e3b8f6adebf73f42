"""Pages follow their jobs, in a real Chromium: a recipe page, an ensemble's page and the serving
panel opened while their jobs wait show the end state (and the Register form and the Predict box
that become possible) without a reload; a study page opened at its first trial draws parallel
coordinates once a second finished trial differs. The jobs are moved to their end through the
services a worker calls (no worker: fast and deterministic), and no page logs an htmx error.
A study page reached from the study list, whose study then completes, logs none either."""

import pytest
from django.utils import timezone

from experiments.models import EnsembleRecipe, RecipeRun, ServingExport, Study, TrainedModel, Trial
from experiments.services import jobs, serving_exports, trained_models
from experiments.services.datasets import dataset_create_bundled
from experiments.services.job_kinds import JOB_KINDS
from tests.browser.conftest import OUTPUT, log_in
from tests.conftest import PASSWORD
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_trial
from tests.web.recipe_rows import study_with_trials

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
SIGNATURE = {"keras": {"inputs": [{"shape": [None, 4], "dtype": "float32"}]}}


def console_errors(page) -> list[str]:
    """Everything the page logs as an error (htmx logs its own, oobErrorNoTarget among them)."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def open_as_alice(page, live_server, path: str) -> list[str]:
    """Log in, open `path`; the errors the page logs from then on."""
    errors = console_errors(page)
    log_in(page, live_server, "alice", PASSWORD)
    page.goto(live_server.url + path)
    return errors


def finish(model: TrainedModel, report: dict | None = None, members: list | None = None) -> None:
    """What a worker does when a model's job ends well: claim, then complete."""
    attempt = jobs.job_claim(kind=JOB_KINDS["models"], pk=model.pk, worker_host="w").attempts
    assert trained_models.model_complete(model_pk=model.pk, attempt=attempt, best_epoch=2, epochs=2,
                                     val_metrics={"loss": 0.2, "accuracy": 0.9},
                                     test_metrics={"loss": 0.25, "accuracy": 0.88}, signature=SIGNATURE, versions={},
                                     files={}, duration_seconds=1.0, report=report, members=members)


def ensemble_report(labels: list[str]) -> dict:
    both = lambda v: {"val": {"loss": v, "accuracy": 0.9}, "test": {"loss": v + 0.05, "accuracy": 0.88}}  # noqa: E731
    return {"method": "nelder_mead", "weights": [0.6, 0.4], "members": labels,
            "comparison": {"ensemble": both(0.1), "mean": both(0.15), "best_member": {"label": labels[0], **both(0.2)}},
            "correlation": [[1.0, 0.5], [0.5, 1.0]]}


def test_the_recipe_and_ensemble_pages_follow_a_run_to_its_end(live_server, page, browser, acme, alice, screenshot):
    iris = dataset_create_bundled(team=acme, user=alice, bundled_name="iris")
    studies = [study_with_trials(acme, alice, iris, "dense search", "dense", [0.30, 0.31]),
               study_with_trials(acme, alice, iris, "tiny search", "tiny", [0.35])]
    recipe = EnsembleRecipe.objects.create(team=acme, name="iris-mix", dataset=iris, created_by=alice)
    recipe.source_studies.set(studies)
    errors = open_as_alice(page, live_server, f"/recipes/{recipe.id}/")
    page.locator("#run-now").click()
    page.wait_for_selector('#run-1[data-status="waiting"]')

    # The retrains end: the open page shows the run building its ensemble.
    run = RecipeRun.objects.get()
    for retrain in run.waiting_on.all():
        finish(retrain)
    page.wait_for_selector('#run-1[data-status="building"]')
    run.refresh_from_db()
    ensemble = run.ensemble

    # The ensemble's page, opened while it waits for a worker.
    other = browser.new_context(viewport={"width": 1280, "height": 800})
    model_page = other.new_page()
    model_errors = open_as_alice(model_page, live_server, f"/models/{ensemble.id}/")
    assert model_page.locator("#model-status").inner_text() == "Queued"
    assert model_page.locator("#register-form").count() == 0 and model_page.locator("#model-predictions").count() == 0

    labels = [str(m.model) for m in ensemble.members.order_by("position")]
    finish(ensemble, report=ensemble_report(labels), members=[{"weight": w, "val": {"loss": 0.2}, "test": {"loss": 0.3}}
                                                               for w in (0.6, 0.4)])
    page.wait_for_selector('#run-1[data-status="completed"]')
    assert f"Ensemble: {ensemble}" in page.locator("#run-1").inner_text()
    screenshot("recipe")

    model_page.locator("#model-status", has_text="Completed").wait_for()
    model_page.locator("#register-form").wait_for()
    assert model_page.locator("#register-name").is_visible()
    assert model_page.locator("#model-predictions #batch-predict-form").is_visible()
    model_page.wait_for_function("document.getElementById('weights-chart').data?.length > 0")
    model_page.screenshot(path=str(OUTPUT / "pages-follow-jobs-ensemble.png"), full_page=True)

    # Nothing polls once the jobs are over.
    assert page.locator("#recipe-runs[hx-trigger]").count() == 0
    assert model_page.locator("#model-live[hx-trigger]").count() == 0
    other.close()
    assert not errors and not model_errors, errors + model_errors


def test_the_serving_panel_follows_export_now_to_its_end(live_server, page, acme, alice, screenshot):
    errors = open_as_alice(page, live_server, "/registry/serving/")
    page.locator("#serving-export-button").click()
    page.wait_for_selector('#serving-last[data-status="queued"]')

    export = ServingExport.objects.get()
    export = jobs.job_claim(kind=JOB_KINDS["serving_exports"], pk=export.pk, worker_host="w")
    page.wait_for_selector('#serving-last[data-status="running"]')
    report = serving_exports.serving_export_write(export=export)
    assert serving_exports.serving_export_complete(export_pk=export.pk, attempt=export.attempts, report=report,
                                                   duration_seconds=0.1)
    page.wait_for_selector('#serving-last[data-status="completed"]')
    assert page.locator("#serving-last-status").inner_text() == "done"
    assert page.locator("#serving-report li").count() > 0
    assert page.locator("#serving[hx-trigger]").count() == 0
    # Export now still takes the user back to this page, not to the panel's fragment.
    assert page.locator('#serving-export-form input[name="next"]').input_value() == "/registry/serving/"
    screenshot("serving")
    assert not errors, errors


def _running_study(acme, alice):
    study = saved_study(acme, alice, dataset_create_bundled(team=acme, user=alice, bundled_name="iris"),
                        name="iris search", max_trials=4)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING, started=timezone.now())
    return study


def _trial(study, number: int, score: float, units: int, learning_rate: float) -> None:
    trial = finished_trial(study, number, score=score)
    Trial.objects.filter(pk=trial.pk).update(hyperparameters={"units": units, "learning_rate": learning_rate})


def test_parallel_coordinates_appear_on_a_page_opened_at_the_first_trial(live_server, page, acme, alice, screenshot):
    study = _running_study(acme, alice)
    _trial(study, 1, 0.8, 4, 0.01)
    errors = open_as_alice(page, live_server, f"/studies/{study.id}/")
    page.locator("#history-chart .main-svg").first.wait_for()
    assert page.locator("#parallel-empty").is_visible()

    _trial(study, 2, 0.9, 12, 0.05)
    page.locator("#parallel-chart .main-svg").first.wait_for()
    assert not page.locator("#parallel-empty").is_visible()
    dimensions = page.evaluate("document.getElementById('parallel-chart').data[0].dimensions.map((d) => d.label)")
    assert len(dimensions) == 3 and dimensions[-1] == "score"  # both hyperparameters, and the score
    assert page.locator("#parallel-axes summary").inner_text().startswith("Axes: 2 of 2")
    screenshot("parallel")
    assert not errors, errors


def test_a_study_page_reached_from_the_list_logs_no_htmx_error_when_its_study_completes(live_server, page, acme,
                                                                                        alice):
    study = _running_study(acme, alice)
    finished_trial(study, 1, score=0.8)
    errors = open_as_alice(page, live_server, "/studies/")
    page.get_by_role("link", name="iris search").click()
    page.wait_for_selector("#study-live[hx-trigger]")

    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED, finished=timezone.now())
    page.locator("#study-status", has_text="Completed").wait_for()
    page.locator("#model-request-form").wait_for()  # the end's out-of-band parts came in
    page.wait_for_timeout(500)
    assert page.locator("#study-live[hx-trigger]").count() == 0
    assert not errors, errors
