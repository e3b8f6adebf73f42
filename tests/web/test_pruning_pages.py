"""Pruning on the pages: the study form's settings and their messages, the pruned state on the
study page (badge, filter, what it saved) and the trial page, and pruned trials kept out of
retraining and ensembles unless asked for."""

import io
import json

import pytest
from django.urls import reverse

from experiments.models import Artifact, Study, TrainedModel, Trial
from experiments.services.artifacts import artifact_create
from experiments.services.studies import study_create
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import json_script, page_text, shows
from tests.web.pruning_rows import seed_pruning_study

pytestmark = pytest.mark.django_db


def _form(dataset, **fields) -> dict:
    return {"name": "pruned study", "dataset": dataset.id, "hypermodel": "dense",
            "search_space": json.dumps(TINY_SPACE), "tuner": "random", "objective_metric": "val_loss",
            "objective_direction": "auto", "max_trials": 5,
            "executions_per_trial": 1, "epochs": 8, "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu",
            "parallelism": 1, "save": "1", **fields}


def _post(client, data):
    return client.post(reverse("study_new"), data)


def test_the_form_saves_the_chosen_pruner_and_its_settings(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, pruner="percentile", pruning_startup_trials=3,
                                         pruning_warmup_epochs=2, pruning_min_trials=4, pruning_percentile=30))
    assert response.status_code == 302
    study = Study.objects.get()
    assert (study.pruner, study.pruning_startup_trials, study.pruning_warmup_epochs, study.pruning_min_trials,
            study.pruning_percentile) == ("percentile", 3, 2, 4, 30.0)
    page = page_text(alice_client.get(response["Location"]))
    assert "Percentile: keeps the best 30 % at each epoch, after a warm-up of 2 epochs; from 3 completed" in page


def test_a_study_saved_without_pruning_settings_does_not_prune(alice_client, acme_dataset):
    assert _post(alice_client, _form(acme_dataset)).status_code == 302
    study = Study.objects.get()
    assert study.pruner == "none" and study.pruning_warmup_epochs == 1
    page = alice_client.get(reverse("study_detail", args=[study.id]))
    assert '<dd id="study-pruning">None</dd>' in page_text(page)
    assert "pruning-savings" not in page_text(page)


@pytest.mark.parametrize(("pruner", "startup"), [("median", 5), ("percentile", 5), ("successive_halving", 0)])
def test_a_setting_left_out_takes_the_chosen_pruners_default(alice_client, acme_dataset, pruner, startup):
    # The rung pruners judge from the first trials on; median and percentile wait for 5 completed.
    assert _post(alice_client, _form(acme_dataset, pruner=pruner)).status_code == 302
    assert Study.objects.get().pruning_startup_trials == startup


def test_a_study_created_by_the_service_gets_its_pruners_defaults_too(acme, alice, acme_dataset):
    # The admin, fixtures and any caller without the form: the pruner's default, not the column's.
    study = study_create(team=acme, user=alice, dataset=acme_dataset, name="halving", hypermodel="dense",
                         search_space=TINY_SPACE, pruner="successive_halving")
    assert (study.pruning_startup_trials, study.pruning_reduction_factor) == (0, 3)
    given = study_create(team=acme, user=alice, dataset=acme_dataset, name="given", hypermodel="dense",
                         search_space=TINY_SPACE, pruner="pareto", pruning_startup_trials=4,
                         extra_objectives=[{"metric": "params", "direction": "min"}])
    assert given.pruning_startup_trials == 4


def test_settings_the_chosen_pruner_does_not_read_keep_their_defaults(alice_client, acme_dataset):
    # The page hides (and does not send) them; a client that sends them anyway changes nothing.
    response = _post(alice_client, _form(acme_dataset, pruner="median", pruning_percentile=500,
                                         pruning_reduction_factor="x"))
    assert response.status_code == 302
    study = Study.objects.get()
    assert (study.pruning_percentile, study.pruning_reduction_factor) == (25.0, 3)


@pytest.mark.parametrize("fields,field,message", [
    ({"tuner": "hyperband", "pruner": "median"}, "pruner", "Hyperband already stops weak trials early"),
    ({"pruner": "median", "pruning_warmup_epochs": 7}, "pruning_warmup_epochs",
     "With 8 epochs per trial the warm-up must be below 7"),
    ({"pruner": "percentile", "pruning_percentile": 100}, "pruning_percentile", "above 0 and below 100"),
    ({"pruner": "successive_halving", "pruning_min_epochs": 8}, "pruning_min_epochs",
     "min epochs must be below 8"),
    ({"pruner": "successive_halving", "pruning_reduction_factor": 1}, "pruning_reduction_factor",
     "Must be a whole number from 2 to 100."),
    ({"pruner": "median", "pruning_min_trials": 0}, "pruning_min_trials", "Must be a whole number from 1"),
    ({"pruner": "sometimes"}, "pruner", "Select a valid choice."),
])
def test_bad_pruning_settings_are_refused_beside_their_field_and_save_nothing(alice_client, acme_dataset, fields,
                                                                              field, message):
    response = _post(alice_client, _form(acme_dataset, **fields))
    assert response.status_code == 200
    assert not Study.objects.exists()
    errors = response.context["form"].errors
    assert any(message in error for error in errors[field]), errors
    assert shows(response, errors[field][0])


def test_the_form_tells_the_page_which_settings_each_pruner_reads(alice_client, acme_dataset):
    response = alice_client.get(reverse("study_new"))
    applies = json_script(response, "pruning-applies")
    assert applies["none"] == []
    defaults = json_script(response, "pruning-defaults")
    assert defaults["median"]["pruning_startup_trials"] == 5 and defaults["pareto"]["pruning_startup_trials"] == 0
    assert applies["percentile"] == ["pruning_startup_trials", "pruning_warmup_epochs", "pruning_min_trials",
                                     "pruning_percentile"]
    assert "pruning_reduction_factor" in applies["successive_halving"]
    assert "Successive halving (asynchronous, ASHA)" in page_text(response)
    assert 'data-pruning-setting="pruning_percentile"' in page_text(response)


@pytest.fixture
def pruning_study(acme_study):
    return seed_pruning_study(acme_study)


def test_the_study_page_shows_pruned_trials_and_the_epochs_pruning_saved(alice_client, pruning_study):
    page = page_text(alice_client.get(reverse("study_detail", args=[pruning_study.id])))
    assert "2 completed, 2 pruned of" in page
    assert "Pruning saved <strong>15 CPU-epochs</strong> by stopping 2 trials early." in page  # (10-2) + (10-3)
    assert page.count('<span class="badge status-pruned">Pruned</span>') == 2
    assert "after epoch 3" in page
    assert '<dd id="study-pruning">Median, after a warm-up of 1 epoch;' in page


def test_gpu_trials_count_their_devices_in_the_savings(alice_client, pruning_study):
    Study.objects.filter(pk=pruning_study.pk).update(queue="gpu", devices_per_trial=4)
    page = page_text(alice_client.get(reverse("study_detail", args=[pruning_study.id])))
    assert "Pruning saved <strong>60 GPU-epochs</strong>" in page
    assert "4 devices per trial" in page


def test_the_trials_table_filters_by_state_and_keeps_the_filter_while_it_refreshes(alice_client, pruning_study):
    Study.objects.filter(pk=pruning_study.pk).update(status=Study.Status.RUNNING)
    url = reverse("study_detail", args=[pruning_study.id])
    page = page_text(alice_client.get(url + "?status=pruned"))
    assert page.count('class="trial-row status-pruned"') == 2 and 'class="trial-row status-completed"' not in page
    assert f"{reverse('study_live', args=[pruning_study.id])}?seen=running&amp;status=pruned" in page
    assert 'data-status="pruned" aria-current="true">Pruned (2)</a>' in page
    live = page_text(alice_client.get(reverse("study_live", args=[pruning_study.id]) + "?status=completed"))
    assert live.count('class="trial-row status-completed"') == 2 and "status-pruned" not in live.split("<tbody>")[1]
    everything = page_text(alice_client.get(url + "?status=bogus"))  # unknown: every trial
    assert everything.count('class="trial-row') == 4


def test_the_trial_page_says_why_and_when_a_trial_was_pruned(alice_client, pruning_study):
    trial = Trial.objects.get(study=pruning_study, number=3)
    page = page_text(alice_client.get(reverse("trial_detail", args=[pruning_study.id, trial.id])))
    assert '<span class="badge status-pruned" id="trial-status">Pruned</span>' in page
    assert ("Pruned after epoch 2: its best val_accuracy so far, 0.5, was worse than the median (0.8) of 3 finished "
            "trials at that epoch. It trained 2 of 10 epochs.") in page
    assert "This trial was pruned" in page  # it may still be made into a model, on purpose


def test_retraining_the_top_trials_leaves_pruned_ones_out_unless_asked(alice_client, pruning_study):
    url = reverse("study_models_request", args=[pruning_study.id])
    data = {"top_n": 3, "method": "retrain", "epoch_source": "detect", "epoch_cap": 50}
    alice_client.post(url, data)
    assert {m.trial.number for m in TrainedModel.objects.all()} == {1, 2}
    TrainedModel.objects.all().delete()
    alice_client.post(url, {**data, "include_pruned": "on"})
    assert {m.trial.number for m in TrainedModel.objects.all()} == {1, 2, 4}  # the best three, pruned or not
    form = page_text(alice_client.get(reverse("study_detail", args=[pruning_study.id])))
    assert "Include pruned trials" in form


def test_the_ensemble_picker_lists_pruned_trials_only_when_asked(alice_client, acme, pruning_study):
    for trial in Trial.objects.filter(study=pruning_study):
        trial.checkpoint = artifact_create(team=acme, kind=Artifact.Kind.CHECKPOINT, filename=f"t{trial.pk}.weights",
                                           fileobj=io.BytesIO(b"weights"))
        trial.save(update_fields=["checkpoint"])
    pruned = Trial.objects.filter(study=pruning_study, status=Trial.Status.PRUNED).first()
    default = page_text(alice_client.get(reverse("ensemble_new")))
    assert f'value="trial:{pruned.id}"' not in default and "Include pruned trials" in default
    included = page_text(alice_client.get(reverse("ensemble_new") + "?include_pruned=1"))
    assert f'value="trial:{pruned.id}"' in included and "status-pruned" in included


def test_pruned_trials_are_listed_best_first_after_the_completed_ones(alice_client, acme_study):
    study = seed_pruning_study(acme_study)  # maximises; pruned trials 3 (0.5) and 4 (0.6)
    page = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    order = [page.index(f'data-trial="{number}"') for number in (1, 2, 4, 3)]
    assert order == sorted(order)
