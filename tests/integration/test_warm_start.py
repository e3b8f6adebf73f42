"""Warm start on a real worker: a clone made on its page, seeded with the top 3 trials of a
finished study, runs exactly those configurations as trials 1-3 and then continues with the
tuner's own proposals up to max trials; a clone to another dataset and hypermodel refuses
seeds with hyperparameters that hypermodel does not have."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study, Trial
from experiments.selectors.trials import study_top_trials
from experiments.services.datasets import dataset_create_bundled
from experiments.tuning.hypermodel_catalog import CNN_DEFAULT_SPACE
from tests.conftest import TEST_HYPERMODELS, wait_for
from tests.integration.helpers import digits, started_study
from tests.web.pages import shows

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.worker]


def _finished(study) -> bool:
    study.refresh_from_db()
    return study.status in (Study.Status.COMPLETED, Study.Status.FAILED, Study.Status.CANCELLED)


def _clone_page_values(client, study) -> dict:
    """What the clone page's form posts when the user changes nothing."""
    form = client.get(reverse("study_clone", args=[study.id])).context["form"]
    return {name: form[name].value() for name in form.fields if form[name].value() is not None}


def test_a_seeded_clone_runs_the_top_3_first_and_then_the_tuner_continues(acme, alice, client, settings,
                                                                          start_worker):
    settings.HYPERMODELS = TEST_HYPERMODELS.split(",")
    worker = start_worker()
    original = started_study(acme, alice, digits(acme, alice), name="original", max_trials=4, epochs=2)
    wait_for(lambda: _finished(original), timeout=300,
             what=f"the original study to finish; worker log:\n{worker.log()[-3000:]}")
    assert original.status == Study.Status.COMPLETED, original.message
    top3 = study_top_trials(study=original, n=3)

    client.force_login(alice)
    values = _clone_page_values(client, original)
    assert values["seed_from"] == [original.id] and values["top_k"] == 3 and values["hypermodel"] == "tiny"
    response = client.post(reverse("study_clone", args=[original.id]), {**values, "max_trials": 6, "start": "1"})
    assert response.status_code == 302, response.context["form"].errors
    clone = Study.objects.get(name="original (copy)")
    wait_for(lambda: _finished(clone), timeout=300,
             what=f"the clone to finish; worker log:\n{worker.log()[-3000:]}")
    assert clone.status == Study.Status.COMPLETED, clone.message

    trials = list(Trial.objects.filter(study=clone).order_by("number"))
    assert [t.number for t in trials] == [1, 2, 3, 4, 5, 6]
    assert all(t.status == Trial.Status.COMPLETED for t in trials)
    assert [t.hyperparameters for t in trials[:3]] == [t.hyperparameters for t in top3]
    assert [t.seeded_from_id for t in trials[:3]] == [t.pk for t in top3]
    tried = [t.hyperparameters for t in trials]
    for own in trials[3:]:
        assert own.seeded_from_id is None
        assert tried.count(own.hyperparameters) == 1  # the tuner's own, never a seed again
    assert clone.seeds_used == 3 and len(clone.oracle_state["end_order"]) == 6
    page = client.get(reverse("study_detail", args=[clone.id]))
    assert shows(page, f"seeded from Trial {top3[0].number} of original")


def test_a_cross_dataset_clone_refuses_hyperparameters_the_new_hypermodel_lacks(acme, alice, client, settings,
                                                                                start_worker):
    settings.HYPERMODELS = TEST_HYPERMODELS.split(",")
    start_worker()
    original = started_study(acme, alice, digits(acme, alice), name="original", max_trials=2, epochs=2)
    wait_for(lambda: _finished(original), timeout=300, what="the original study to finish")
    best = study_top_trials(study=original, n=1)[0]
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")

    client.force_login(alice)
    values = {**_clone_page_values(client, original), "dataset": images.id, "hypermodel": "cnn",
              "search_space": json.dumps(CNN_DEFAULT_SPACE), "objective_metric": "val_accuracy", "save": "1"}
    response = client.post(reverse("study_clone", args=[original.id]), values)
    assert response.status_code == 200
    assert shows(response, f"Trial {best.number} of original: units is not a hyperparameter of the new search "
                           "space.")
    assert shows(response, "A seed can only set hyperparameters the cnn hypermodel's search space has")
    assert list(Study.objects.values_list("name", flat=True)) == ["original"]
