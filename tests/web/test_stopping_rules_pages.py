"""Stopping rules on the pages: the new-study form saves them or refuses a bad one at its field
with nothing saved, the study page states them and, once a rule stopped the study, why; a
clone comes filled in with them."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db


def _form(dataset, **fields) -> dict:
    return {"name": "stopping study", "dataset": dataset.id, "hypermodel": "dense",
            "search_space": json.dumps(TINY_SPACE), "tuner": "random", "objective_metric": "val_accuracy",
            "objective_direction": "auto", "max_trials": 5, "executions_per_trial": 1, "epochs": 2,
            "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu", "parallelism": 1, "save": "1", **fields}


def _post(client, data):
    return client.post(reverse("study_new"), data)


def test_the_form_offers_the_stopping_rules_with_help(alice_client):
    page = alice_client.get(reverse("study_new"))
    assert 'id="stopping-settings"' in page_text(page)
    for name in ("stop_target", "stop_patience", "stop_min_delta", "stop_device_hours"):
        assert f'name="{name}"' in page_text(page)
    assert shows(page, "An improvement of δ or less does not count")
    # The numbers that may have decimals are text a browser sends as typed (a number input sends
    # "1e" as empty and "0,5" as "05"), so the server sees the typo and refuses it.
    for name in ("stop_target", "stop_min_delta", "stop_device_hours"):
        assert f'<input type="text" name="{name}"' in page_text(page) and 'inputmode="decimal"' in page_text(page)


def test_the_form_saves_the_rules_and_the_study_page_states_them(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, stop_target="0.95", stop_patience="4", stop_min_delta="0.001"))
    assert response.status_code == 302
    study = Study.objects.get()
    assert (study.objective_direction, study.stop_target, study.stop_patience, study.stop_min_delta) == (
        "max", 0.95, 4, 0.001)
    page = alice_client.get(response["Location"])
    assert shows(page, "Stop once val_accuracy ≥ 0.95, or when the best has not improved by more than 0.001 in "
                       "4 trials")


def test_empty_rules_save_a_study_that_runs_its_whole_budget(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, stop_target="", stop_patience="", stop_min_delta=""))
    assert response.status_code == 302
    study = Study.objects.get()
    assert (study.stop_target, study.stop_patience, study.stop_min_delta) == (None, None, 0.0)
    assert shows(alice_client.get(response["Location"]), "None: the study runs its whole budget")


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"stop_target": "nan"}, "stop_target", "Must be a finite number, or empty for no target."),
    ({"stop_target": "1e999"}, "stop_target", "Must be a finite number, or empty for no target."),
    ({"stop_patience": "0"}, "stop_patience", "Must be a whole number from 1 to 5 (max trials)"),
    ({"stop_patience": "6"}, "stop_patience", "Must be a whole number from 1 to 5 (max trials)"),
    ({"stop_patience": "2", "stop_min_delta": "-0.1"}, "stop_min_delta", "Must be 0 or a positive number."),
    ({"stop_min_delta": "0.01"}, "stop_min_delta", "Only applies with trials without improvement"),
    ({"stop_device_hours": "-1"}, "stop_device_hours", "Must be a positive number of device-hours"),
    ({"stop_device_hours": "0,5"}, "stop_device_hours", "Must be a positive number of device-hours"),
    ({"stop_device_hours": "1e"}, "stop_device_hours", "Must be a positive number of device-hours"),
])
def test_a_bad_rule_is_refused_at_its_field_and_nothing_is_saved(alice_client, acme_dataset, fields, field, message):
    response = _post(alice_client, _form(acme_dataset, **fields))
    assert response.status_code == 200
    assert any(error.startswith(message) for error in response.context["form"].errors[field])
    assert shows(response, message)
    assert not Study.objects.exists()


def test_a_study_stopped_early_shows_why_prominently(alice_client, acme_study):
    reason = "Stopped early: val_accuracy reached 0.97 (target 0.95) at trial 3."
    Study.objects.filter(pk=acme_study.pk).update(status=Study.Status.COMPLETED, message=reason, stop_target=0.95)
    page = alice_client.get(reverse("study_detail", args=[acme_study.id]))
    assert 'id="stopped-early"' in page_text(page) and shows(page, reason)
    live = alice_client.get(reverse("study_live", args=[acme_study.id]))
    assert 'id="stopped-early"' in page_text(live)


def test_a_clone_comes_filled_in_with_the_rules_and_keeps_them(alice_client, acme_study):
    Study.objects.filter(pk=acme_study.pk).update(stop_target=0.9, stop_patience=2, stop_min_delta=0.01)
    form = alice_client.get(reverse("study_clone", args=[acme_study.id])).context["form"]
    assert (form["stop_target"].value(), form["stop_patience"].value(), form["stop_min_delta"].value()) == (
        0.9, 2, 0.01)
