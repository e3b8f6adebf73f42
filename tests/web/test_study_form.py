"""The new-study form: a valid form creates (and optionally starts) a study; every bad
search space or setting re-renders the page with its message and saves no study."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study
from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import json_script, page_text, shows

pytestmark = pytest.mark.django_db


def _row(name: str, type_: str, **spec) -> dict:
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


def _form(dataset, *, space=TINY_SPACE, button: str = "start", **fields) -> dict:
    return {
        "name": "my study",
        "dataset": dataset.id,
        "hypermodel": "dense",
        "search_space": space if isinstance(space, str) else json.dumps(space),
        "tuner": "random",
        "objective_metric": "val_accuracy",
        "objective_direction": "auto",
        "max_trials": 5,
        "executions_per_trial": 1,
        "epochs": 4,
        "batch_size": 32,
        "patience": 2,
        "seed": 1,
        "queue": "cpu",
        "parallelism": 1,
        button: "1",
        **fields,
    }


def _post(client, data):
    return client.post(reverse("study_new"), data)


def test_saving_and_starting_creates_a_running_study(alice_client, acme, alice, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, button="start"))

    study = Study.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("study_detail", args=[study.id])
    assert study.status == Study.Status.RUNNING
    assert study.started is not None
    assert (study.team, study.created_by, study.dataset) == (acme, alice, acme_dataset)
    assert [row["name"] for row in study.search_space] == ["units", "learning_rate"]
    assert study.objective_direction == Study.Direction.MAX  # inferred from val_accuracy
    assert (study.max_trials, study.epochs, study.batch_size, study.patience) == (5, 4, 32, 2)
    assert "Study my study started." in page_text(alice_client.get(response["Location"]))


def test_saving_without_starting_creates_a_study_that_has_not_started(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, button="save", objective_metric="val_loss"))

    study = Study.objects.get()
    assert response.status_code == 302
    assert study.status == Study.Status.CREATED
    assert study.started is None
    assert study.objective_direction == Study.Direction.MIN  # inferred from val_loss


def test_the_new_study_page_renders_with_the_dataset_preselected(alice_client, acme_dataset):
    response = alice_client.get(reverse("study_new") + f"?dataset={acme_dataset.id}")
    assert response.status_code == 200
    assert f'<option value="{acme_dataset.id}" selected>' in page_text(response)
    assert json_script(response, "search-space-errors") == {}


# name -> (rows, index of the bad row, a phrase of its message)
BAD_SPACES = {
    "min greater than max": (
        [_row("units", "int", min=64, max=8, step=8, sampling="linear")],
        0,
        "greater than max",
    ),
    "empty choices": (
        [TINY_SPACE[0], _row("activation", "choice", values=[], ordered=False)],
        1,
        "at least one value",
    ),
    "log sampling with min 0": (
        [_row("learning_rate", "float", min=0.0, max=0.1, step=None, sampling="log")],
        0,
        "min greater than 0",
    ),
    "log sampling with a negative min": (
        [_row("learning_rate", "float", min=-1.0, max=0.1, step=None, sampling="log")],
        0,
        "min greater than 0",
    ),
    "duplicate names": ([TINY_SPACE[0], TINY_SPACE[1], TINY_SPACE[0]], 2, "already named units"),
    "unknown parent": (
        [TINY_SPACE[0], {**TINY_SPACE[1], "parent": "optimizer", "parent_values": ["sgd"]}],
        1,
        "optimizer, which is not in this space",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SPACES))
def test_a_bad_search_space_row_is_shown_on_its_row_and_saves_no_study(
    alice_client, acme_dataset, case
):
    rows, index, phrase = BAD_SPACES[case]
    posted = _form(acme_dataset, space=rows)

    response = _post(alice_client, posted)

    assert response.status_code == 200
    assert not Study.objects.exists()
    errors = json_script(response, "search-space-errors")
    assert list(errors) == [str(index)]
    assert any(phrase in message for message in errors[str(index)]), errors
    assert shows(response, "Fix the hyperparameters marked below.")
    # What the user typed comes back to be fixed, not the defaults.
    assert shows(response, posted["search_space"])


@pytest.mark.parametrize(
    "space, message",
    [
        (
            '[{"name": "units", "type": "int", "min": 1, "max": 4,',
            "The search space is not valid JSON",
        ),
        ("", "This field is required."),
        ("[]", "Add at least one hyperparameter."),
        ('{"name": "units"}', "The search space must be a list of hyperparameters."),
    ],
)
def test_a_search_space_that_is_not_a_list_of_rows_is_refused(
    alice_client, acme_dataset, space, message
):
    response = _post(alice_client, _form(acme_dataset, space=space))

    assert response.status_code == 200
    assert shows(response, message)
    assert json_script(response, "search-space-errors") == {}
    assert not Study.objects.exists()


def test_a_dataset_of_another_team_is_rejected(alice_client, globex, charlie):
    theirs = dataset_create_bundled(team=globex, user=charlie, bundled_name="iris")

    response = _post(alice_client, _form(theirs))

    assert response.status_code == 200
    assert shows(response, "Select a valid choice.")
    assert not Study.objects.exists()


def test_an_objective_the_builtin_hypermodel_does_not_report_is_rejected(
    alice_client, acme_dataset
):
    response = _post(alice_client, _form(acme_dataset, objective_metric="val_auc"))

    assert response.status_code == 200
    assert shows(
        response,
        "The dense hypermodel on a classification dataset reports "
        "val_accuracy, val_loss, accuracy, loss; choose one of them.",
    )
    assert not Study.objects.exists()


def test_a_test_split_metric_is_rejected(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, objective_metric="test_accuracy"))

    assert response.status_code == 200
    assert shows(response, "The test split is never used for selection.")
    assert not Study.objects.exists()


def test_a_test_split_metric_is_rejected_for_a_team_hypermodel_too(
    alice_client, acme_dataset, settings
):
    settings.HYPERMODELS = ["tiny=tests.fixtures.hypermodels:build_tiny"]
    form = _form(acme_dataset, hypermodel="tiny")
    assert _post(alice_client, form).status_code == 302, "the team hypermodel itself is accepted"

    response = _post(alice_client, {**form, "name": "peeking", "objective_metric": "test_accuracy"})

    assert response.status_code == 200
    assert shows(response, "The test split is never used for selection.")
    assert list(Study.objects.values_list("name", flat=True)) == ["my study"]


def test_an_unknown_hypermodel_is_rejected(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, hypermodel="transformer"))

    assert response.status_code == 200
    assert shows(
        response, "Select a valid choice. transformer is not one of the available choices."
    )
    assert not Study.objects.exists()


def test_grid_search_with_a_float_without_step_is_rejected(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, tuner="grid"))

    assert response.status_code == 200
    assert shows(response, "Grid search needs a finite grid: give every Float a step, or use another tuner.")
    assert not Study.objects.exists()


def test_grid_search_over_a_finite_grid_is_accepted(alice_client, acme_dataset):
    space = [TINY_SPACE[0], {**TINY_SPACE[1], "sampling": "linear", "step": 0.033}]
    response = _post(alice_client, _form(acme_dataset, space=space, tuner="grid", button="save"))
    assert response.status_code == 302
    assert Study.objects.get().tuner == Study.Tuner.GRID


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("max_trials", 0, "Ensure this value is greater than or equal to 1."),
        ("epochs", 1001, "Ensure this value is less than or equal to 1000."),
        ("parallelism", 65, "Ensure this value is less than or equal to 64."),
        ("name", "   ", "This field is required."),
    ],
)
def test_out_of_range_settings_are_rejected(alice_client, acme_dataset, field, value, message):
    response = _post(alice_client, _form(acme_dataset, **{field: value}))

    assert response.status_code == 200
    assert shows(response, message)
    assert not Study.objects.exists()


def test_hyperband_with_fewer_than_three_epochs_is_rejected(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, tuner="hyperband", epochs=2))

    assert response.status_code == 200
    assert shows(response, "Hyperband needs at least 3 epochs to form brackets.")
    assert not Study.objects.exists()


def test_hypermodels_are_chosen_by_name_with_the_chosen_ones_description_beside(alice_client, acme_dataset):
    from experiments.tuning.hypermodel_catalog import BUILTIN

    page = page_text(alice_client.get(reverse("study_new")))
    select = page.split('id="id_hypermodel"', 1)[1].split("</select>", 1)[0]
    assert '<option value="dense" selected>dense</option>' in select
    assert '<option value="cnn">cnn</option>' in select and "MLP" not in select  # no paragraph in the dropdown
    assert 'aria-describedby="hypermodel-description"' in page
    shown = page.split('id="hypermodel-description"', 1)[1].split("</p>", 1)[0]
    assert BUILTIN["dense"].description in shown
    assert json_script(alice_client.get(reverse("study_new")), "hypermodel-descriptions")["cnn"] == \
        BUILTIN["cnn"].description


def test_a_refused_form_describes_the_hypermodel_it_was_sent(alice_client, acme_dataset):
    from experiments.tuning.hypermodel_catalog import BUILTIN

    response = alice_client.post(reverse("study_new"), _form(acme_dataset, hypermodel="sequence", max_trials=0))
    assert response.status_code == 200
    shown = page_text(response).split('id="hypermodel-description"', 1)[1].split("</p>", 1)[0]
    assert BUILTIN["sequence"].description in shown
