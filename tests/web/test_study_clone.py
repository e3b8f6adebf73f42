"""Clone a study from its page (same or another dataset) and warm-start it from the best
trials of earlier studies: the form comes filled in, the seeds must fit the new search
space (a message names the hyperparameter and the source trial, nothing is saved), other
teams' studies are 404, and seeded trials say where they come from."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study, Trial
from experiments.services.datasets import dataset_create_bundled
from experiments.tuning.hypermodel_catalog import CNN_DEFAULT_SPACE
from tests.integration.helpers import TINY_SPACE, saved_study
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db

# acme study maximises val_accuracy: its best three are trials 2, 4 and 1.
SCORES = {1: ({"units": 4, "learning_rate": 0.01}, 0.7), 2: ({"units": 8, "learning_rate": 0.002}, 0.9),
          3: ({"units": 16, "learning_rate": 0.05}, 0.5), 4: ({"units": 12, "learning_rate": 0.004}, 0.8)}


def _finished(study, scores=SCORES) -> dict[int, Trial]:
    return {number: Trial.objects.create(study=study, trial_id=str(number - 1), number=number,
                                         status=Trial.Status.COMPLETED, hyperparameters=values, score=score)
            for number, (values, score) in scores.items()}


@pytest.fixture
def source(acme_study) -> Study:
    _finished(acme_study)
    return acme_study


def _clone_form(dataset, **fields) -> dict:
    return {"name": "acme study (copy)", "dataset": dataset.id, "hypermodel": "dense",
            "search_space": json.dumps(TINY_SPACE), "tuner": "random", "objective_metric": "val_accuracy",
            "objective_direction": "max", "max_trials": 5, "executions_per_trial": 1, "epochs": 2,
            "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu", "parallelism": 1, "save": "1", **fields}


def _post(client, study, data):
    return client.post(reverse("study_clone", args=[study.id]), data)


def test_editors_get_a_clone_button_and_viewers_do_not(alice_client, client, bob, acme_study):
    url = reverse("study_clone", args=[acme_study.id])
    assert url in page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    client.force_login(bob)
    assert url not in page_text(client.get(reverse("study_detail", args=[acme_study.id])))
    assert client.get(url).status_code == 403


def test_the_clone_page_is_filled_in_from_the_original(alice_client, acme_study):
    Study.objects.filter(pk=acme_study.pk).update(
        tuner="bayesian", initial_random_trials=4, objective_metric="val_loss", objective_direction="min",
        max_trials=7, epochs=3, batch_size=16, patience=5, seed=42, parallelism=2, precision="mixed_float16",
        jit_compile="off", steps_per_execution=4, devices_per_trial=2)
    _finished(acme_study)
    response = alice_client.get(reverse("study_clone", args=[acme_study.id]))
    assert response.status_code == 200
    assert shows(response, "Clone of acme study")
    form = response.context["form"]
    values = {name: form[name].value() for name in form.fields}
    assert values["name"] == "acme study (copy)" and values["dataset"] == acme_study.dataset_id
    assert json.loads(values["search_space"]) == acme_study.search_space
    assert {k: values[k] for k in ("hypermodel", "tuner", "initial_random_trials", "objective_metric",
                                   "objective_direction", "max_trials", "epochs", "batch_size", "patience", "seed",
                                   "queue", "parallelism", "precision", "jit_compile", "steps_per_execution",
                                   "devices_per_trial", "executions_per_trial")} == {
        "hypermodel": "dense", "tuner": "bayesian", "initial_random_trials": 4, "objective_metric": "val_loss",
        "objective_direction": "min", "max_trials": 7, "epochs": 3, "batch_size": 16, "patience": 5, "seed": 42,
        "queue": "cpu", "parallelism": 2, "precision": "mixed_float16", "jit_compile": "off",
        "steps_per_execution": 4, "devices_per_trial": 2, "executions_per_trial": 1}
    assert values["seed_from"] == [acme_study.id] and values["top_k"] == 3  # seeded from the original by default
    assert f'<option value="{acme_study.id}" selected>' in page_text(response)


def test_a_study_without_finished_trials_is_not_preselected_to_seed_from(alice_client, acme_study):
    form = alice_client.get(reverse("study_clone", args=[acme_study.id])).context["form"]
    assert form["seed_from"].value() == []


def test_a_clone_on_another_dataset_runs_the_top_k_of_each_chosen_study_first(alice_client, acme, alice, source):
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    # A second source minimises val_loss: its best is its lowest.
    other = saved_study(acme, alice, source.dataset, name="by loss", hypermodel="dense", objective_metric="val_loss",
                        objective_direction="min")
    _finished(other, {1: ({"units": 16, "learning_rate": 0.001}, 0.2), 2: ({"units": 4, "learning_rate": 0.1}, 0.9)})
    response = _post(alice_client, source, _clone_form(wine, seed_from=[source.id, other.id], top_k=2))
    clone = Study.objects.get(name="acme study (copy)")
    assert response.status_code == 302 and response["Location"] == reverse("study_detail", args=[clone.id])
    assert clone.dataset == wine and clone.status == Study.Status.CREATED
    assert [(s["label"], s["hyperparameters"]) for s in clone.seeds] == [
        ("Trial 2 of acme study", SCORES[2][0]), ("Trial 4 of acme study", SCORES[4][0]),
        ("Trial 1 of by loss", {"units": 16, "learning_rate": 0.001}),
        ("Trial 2 of by loss", {"units": 4, "learning_rate": 0.1})]
    page = alice_client.get(response["Location"])
    assert shows(page, "Warm start: 4 configurations of earlier trials run first")
    assert shows(page, "4 configurations of earlier trials run first.")


def test_a_seed_outside_the_new_space_is_refused_naming_it_and_nothing_is_saved(alice_client, source):
    space = [dict(TINY_SPACE[0], min=8, max=32, step=8), TINY_SPACE[1]]
    response = _post(alice_client, source, _clone_form(source.dataset, search_space=json.dumps(space),
                                                        seed_from=[source.id]))
    assert response.status_code == 200
    assert shows(response, "Trial 1 of acme study: units = 4 is outside the range 8 to 32 by 8.")
    assert not shows(response, "Trial 2 of acme study")  # it fits
    assert Study.objects.count() == 1


def test_a_clone_to_another_hypermodel_refuses_hyperparameters_it_does_not_have(alice_client, acme, alice, source):
    images = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    response = _post(alice_client, source, _clone_form(images, hypermodel="cnn", search_space=json.dumps(
        CNN_DEFAULT_SPACE), seed_from=[source.id]))
    assert response.status_code == 200
    assert shows(response, "Trial 2 of acme study: units is not a hyperparameter of the new search space.")
    assert shows(response, "A seed can only set hyperparameters the cnn hypermodel's search space has")
    assert Study.objects.count() == 1
    # Without seeds the same clone is fine: the refusal is about the seeds.
    assert _post(alice_client, source, _clone_form(images, hypermodel="cnn", search_space=json.dumps(
        CNN_DEFAULT_SPACE))).status_code == 302
    assert Study.objects.filter(dataset=images, seeds=[]).count() == 1


def test_hyperparameters_a_seed_lacks_take_the_default_and_the_page_says_so(alice_client, source):
    space = [*TINY_SPACE, {"name": "dropout", "type": "float", "min": 0.0, "max": 0.5, "step": 0.1,
                           "sampling": "linear", "parent": None, "parent_values": []}]
    response = _post(alice_client, source, _clone_form(source.dataset, search_space=json.dumps(space),
                                                        seed_from=[source.id], top_k=1))
    clone = Study.objects.get(name="acme study (copy)")
    assert clone.seeds[0]["hyperparameters"] == {**SCORES[2][0], "dropout": 0.0}
    page = alice_client.get(response["Location"])
    assert shows(page, "Trial 2 of acme study has no value for dropout: it takes the search space's default.")
    assert "No value for dropout in the source trial: the search space's default is used." in page_text(page)


def test_repeated_configurations_run_once(alice_client, source):
    Trial.objects.filter(study=source, number=4).update(hyperparameters=SCORES[2][0])
    response = _post(alice_client, source, _clone_form(source.dataset, seed_from=[source.id]))
    clone = Study.objects.get(name="acme study (copy)")
    assert [s["label"] for s in clone.seeds] == ["Trial 2 of acme study", "Trial 1 of acme study"]
    assert shows(alice_client.get(response["Location"]),
                 "Trial 4 of acme study has the same configuration as Trial 2 of acme study; it runs once.")


def test_a_chosen_study_without_finished_trials_adds_no_seeds_and_says_so(alice_client, acme_study):
    response = _post(alice_client, acme_study, _clone_form(acme_study.dataset, seed_from=[acme_study.id]))
    clone = Study.objects.get(name="acme study (copy)")
    assert clone.seeds == []
    assert shows(alice_client.get(response["Location"]),
                 "acme study has no completed trials yet: nothing to seed from it.")


@pytest.mark.parametrize(("fields", "message"), [
    ({"max_trials": 2}, "The warm start brings 3 configurations, more than max trials (2)"),
    ({"top_k": 21}, "Ensure this value is less than or equal to 20."),
    ({"top_k": 0}, "Ensure this value is greater than or equal to 1."),
])
def test_bad_warm_start_settings_are_refused_and_nothing_is_saved(alice_client, source, fields, message):
    response = _post(alice_client, source, _clone_form(source.dataset, seed_from=[source.id], **fields))
    assert response.status_code == 200 and shows(response, message)
    assert Study.objects.count() == 1


def test_another_teams_study_is_404_to_clone_and_to_seed_from(alice_client, client, charlie, globex, source):
    theirs = saved_study(globex, charlie, dataset_create_bundled(team=globex, user=charlie, bundled_name="iris"),
                         name="globex study", hypermodel="dense")
    _finished(theirs)
    response = _post(alice_client, source, _clone_form(source.dataset, seed_from=[source.id, theirs.id]))
    assert response.status_code == 404 and "globex study" not in page_text(response)
    assert alice_client.get(reverse("study_clone", args=[theirs.id])).status_code == 404
    response = alice_client.post(reverse("study_new"), _clone_form(source.dataset, seed_from=[theirs.id]))
    assert response.status_code == 404
    client.force_login(charlie)
    assert _post(client, source, _clone_form(theirs.dataset)).status_code == 404
    assert Study.objects.count() == 2


def test_seeded_trials_say_where_they_come_from(alice_client, acme, alice, source):
    clone = saved_study(acme, alice, source.dataset, name="warm", hypermodel="dense", seed_from=[source], top_k=1)
    origin = Trial.objects.get(study=source, number=2)
    seeded = Trial.objects.create(study=clone, trial_id="0", number=1, status=Trial.Status.COMPLETED,
                                  hyperparameters=origin.hyperparameters, score=0.91, seeded_from=origin)
    Trial.objects.create(study=clone, trial_id="1", number=2, status=Trial.Status.COMPLETED,
                         hyperparameters={"units": 12, "learning_rate": 0.02}, score=0.5)
    table = page_text(alice_client.get(reverse("study_detail", args=[clone.id])))
    assert table.count("seeded from Trial 2 of acme study") == 1
    page = alice_client.get(reverse("trial_detail", args=[clone.id, seeded.pk]))
    assert shows(page, "seeded from Trial 2 of acme study")
    assert reverse("trial_detail", args=[source.id, origin.pk]) in page_text(page)
