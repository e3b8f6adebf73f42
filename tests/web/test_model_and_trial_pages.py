"""The model and trial pages lead with what matters (status, metrics with sources, lineage,
hyperparameters, downloads), draw learning curves, and fold the per-epoch rows away; trials
are numbered one way (1-based, as the study counts them) and figures rounded one way; the
objective metric is picked from what the hypermodel reports."""

import csv
import io

import pytest
from django.urls import reverse

from experiments.models import Trial
from tests.web.figures_rows import finished_model, finished_trial
from tests.web.pages import json_script, page_text

pytestmark = pytest.mark.django_db


def _in_order(page: str, *markers: str) -> None:
    positions = [page.index(marker) for marker in markers]
    assert positions == sorted(positions), dict(zip(markers, positions, strict=True))


def test_the_model_page_leads_with_status_metrics_lineage_hyperparameters_and_downloads(
        alice_client, acme, alice, acme_study, acme_trial):
    model = finished_model(acme, alice, acme_study, acme_trial, best_epoch=37, epoch_cap=100, phases=True)
    response = alice_client.get(reverse("model_detail", args=[model.id]))
    page = page_text(response)
    _in_order(page, 'id="model-status"', 'id="model-metrics"', 'id="model-lineage"', 'id="model-hyperparameters"',
              'id="downloads"', 'id="learning-curves-chart"', '<details class="card" id="epochs">',
              'class="table compact epochs-table"')
    assert "<summary>Every epoch (47 in best-epoch detection (train, validated); 44 in retraining " in page
    curves = json_script(response, "learning-curves")
    assert [s["name"] for s in curves["series"]] == ["Best-epoch detection (train, validated)",
                                                    "Retraining (train+validation)"]
    detection, retrain = curves["series"]
    assert curves["metric"] == "accuracy" and detection["epoch"][:3] == [1, 2, 3] and len(detection["epoch"]) == 47
    assert detection["val_loss"] and detection["val_metric"] and retrain["loss"] and retrain["val_loss"] is None
    assert curves["marks"] == [{"epoch": 37, "label": "best epoch"}]  # the cap (100) stopped nothing
    capped = finished_model(acme, alice, acme_study, acme_trial, name="capped", best_epoch=30, epoch_cap=40,
                            phases=True)
    assert json_script(alice_client.get(reverse("model_detail", args=[capped.id])), "learning-curves")["marks"] == [
        {"epoch": 30, "label": "best epoch"}, {"epoch": 40, "label": "epoch cap"}]
    assert "plotly.min.js" in page and "js/learning_curves.js" in page


def test_a_promoted_model_shows_its_trials_curves(alice_client, acme, alice, acme_study):
    trial = finished_trial(acme_study, 1, epochs=2)
    model = finished_model(acme, alice, acme_study, trial, method="promote", best_epoch=2)
    response = alice_client.get(reverse("model_detail", args=[model.id]))
    curves = json_script(response, "learning-curves")
    assert [s["name"] for s in curves["series"]] == ["search trial, execution 1"]
    assert curves["series"][0]["epoch"] == [1, 2] and "these are its trial&#x27;s curves" not in page_text(response)
    assert "these are its trial's curves" in page_text(response)


def test_the_trial_page_leads_with_metrics_and_hyperparameters_and_rounds_like_every_page(alice_client, acme_study):
    trial = finished_trial(acme_study, 3, score=0.12345678901234567,
                           metrics={"val_accuracy": 0.12345678901234567, "val_loss": 1.8765432109876543,
                                    "accuracy": 0.5, "loss": 1.5})
    response = alice_client.get(reverse("trial_detail", args=[acme_study.id, trial.id]))
    page = page_text(response)
    assert "<title>Trial 3 · acme study" in page and "<h1>Trial 3 <small" in page and "KerasTuner id 2" in page
    assert "0.12345678901234567" not in page and "<strong>0.1235</strong>" in page
    assert 'data-metric="val_loss">1.8765<' in page
    _in_order(page, 'id="trial-status"', 'id="trial-metrics"', 'id="trial-hyperparameters"',
              'id="learning-curves-chart"', '<details class="card" id="epochs">', 'id="epochs-table"')
    curves = json_script(response, "learning-curves")
    assert curves["series"][0]["name"] == "this trial" and curves["series"][0]["epoch"] == [1, 2]
    assert {"epoch": 2, "label": "last epoch"} in curves["marks"]


def test_trials_are_numbered_from_one_everywhere(alice_client, acme, alice, acme_study):
    first, second = finished_trial(acme_study, 1, score=0.7), finished_trial(acme_study, 2, score=0.8)
    finished_model(acme, alice, acme_study, first, name="from-first")
    study_page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    table = study_page.split('id="trials-table"')[1]
    assert ">Trial 1</a>" in table and ">Trial 2</a>" in table and ">0</a>" not in table
    assert f'Best: <a href="{reverse("trial_detail", args=[acme_study.id, second.id])}">trial 2</a>' in study_page
    assert "from trial 1" in study_page.split('id="study-models-list"')[1]
    data = alice_client.get(reverse("study_chart_data", args=[acme_study.id])).json()
    assert data["history"]["number"] == [1, 2]
    assert sorted(c["trial"] for c in data["curves"]) == ["trial 1", "trial 2"]
    compare = page_text(alice_client.get(reverse("study_compare", args=[acme_study.id]),
                                         {"trials": [first.id, second.id]}))
    assert ">Trial 1</a>" in compare and ">Trial 2</a>" in compare
    assert json_script(alice_client.get(reverse("study_compare", args=[acme_study.id]),
                                        {"trials": [first.id, second.id]}), "compare-curves")[0]["trial"] == "trial 1"
    rows = list(csv.DictReader(io.StringIO(page_text(alice_client.get(reverse("study_trials_csv",
                                                                              args=[acme_study.id]))))))
    assert [(r["number"], r["trial_id"]) for r in rows] == [("1", "0"), ("2", "1")]  # raw ids kept beside
    listing = page_text(alice_client.get(reverse("model_list")))
    assert ">Trial 1</a>" in listing and "· 0" not in listing and ">0</a>" not in listing


def test_a_retried_trial_keeps_its_own_number(alice_client, acme_study):
    finished_trial(acme_study, 1)
    retried = Trial.objects.create(study=acme_study, trial_id="0", number=2, attempt=2, status=Trial.Status.LOST)
    page = page_text(alice_client.get(reverse("trial_detail", args=[acme_study.id, retried.id])))
    assert "<h1>Trial 2 (attempt 2)" in page


def test_the_objective_metric_is_chosen_from_what_a_builtin_hypermodel_reports(alice_client, acme, alice,
                                                                              acme_dataset):
    response = alice_client.get(reverse("study_new") + f"?dataset={acme_dataset.id}")
    page = page_text(response)
    select = page.split('<select name="objective_metric"', 1)[1].split("</select>", 1)[0]
    assert [o.split('"')[1] for o in select.split("<option value=")[1:]] == [
        "val_accuracy", "val_loss", "accuracy", "loss"]
    assert json_script(response, "dataset-tasks") == {str(acme_dataset.id): "classification"}
    assert json_script(response, "task-metrics")["regression"] == ["val_loss", "val_mae", "loss", "mae"]
    assert "dense" in json_script(response, "builtin-hypermodels")


def test_a_team_hypermodel_takes_any_objective_metric_as_text(alice_client, acme_dataset, settings):
    settings.HYPERMODELS = ["tiny=tests.fixtures.hypermodels:build_tiny"]
    page = page_text(alice_client.get(reverse("study_new") + f"?dataset={acme_dataset.id}"))
    assert '<select name="objective_metric"' in page  # the default hypermodel is a built-in
    from tests.web.test_study_form import _form, _post

    response = _post(alice_client, _form(acme_dataset, hypermodel="tiny", objective_metric="val_auc", button="save"))
    assert response.status_code == 302  # free text for team hypermodels, direction still inferred
    bound = _post(alice_client, _form(acme_dataset, hypermodel="tiny", objective_metric="test_auc"))
    text = page_text(bound)
    assert '<input type="text" name="objective_metric" value="test_auc"' in text
    assert "The test split is never used for selection." in text
