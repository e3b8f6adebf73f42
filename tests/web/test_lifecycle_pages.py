"""What the lifecycle shows and lets people do: the Bayesian tuner's initial random trials (on
the form, with the number an empty field means, and on the study page), cancelling a model,
study rules enforced by the service whatever the caller, and results nobody edits by hand."""

import json

import pytest
from django.urls import reverse

from experiments.models import Study, TrainedModel, Trial
from experiments.services.studies import StudyError, study_create
from experiments.services.trained_models import trained_models_request
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import page_text, shows
from tests.web.test_study_form import _form, _post

pytestmark = pytest.mark.django_db


def test_the_form_says_what_an_empty_initial_random_trials_means(alice_client, acme_dataset):
    response = alice_client.get(reverse("study_new"))
    assert shows(response, "Initial random trials (Bayesian)")
    form = response.context["form"]
    rows = len(json.loads(form.initial["search_space"]))
    trials = form.initial.get("max_trials") or form.fields["max_trials"].initial
    expected = max(min(3 * rows, trials // 4), 3)
    assert f'<span id="initial-random-default">{expected}</span>' in page_text(response)


def test_the_default_initial_random_trials_suit_a_small_budget(alice_client, acme_dataset):
    space = [{"name": f"h{i}", "type": "float", "min": 0.0, "max": 1.0} for i in range(8)]
    form = _form(acme_dataset, tuner="bayesian", space=space, max_trials=20)
    page = page_text(_post(alice_client, {**form, "name": ""}))  # refused: the page is shown again
    assert '<span id="initial-random-default">5</span>' in page  # 3 x 8 = 24, but a quarter of 20
    form = _form(acme_dataset, tuner="bayesian", space=space, max_trials=200)
    assert '<span id="initial-random-default">24</span>' in page_text(_post(alice_client, {**form, "name": ""}))


def test_a_bayesian_study_keeps_its_initial_random_trials(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, tuner="bayesian", initial_random_trials=2, button="save"))
    assert response.status_code == 302
    assert Study.objects.get().initial_random_trials == 2


def test_initial_random_trials_with_another_tuner_is_refused_with_a_message(alice_client, acme_dataset):
    response = _post(alice_client, _form(acme_dataset, tuner="random", initial_random_trials=5))
    assert response.status_code == 200
    assert shows(response, "Initial random trials only apply to Bayesian optimisation, Optuna TPE and Optuna")
    assert not Study.objects.exists()


def test_the_service_enforces_the_rules_the_form_shows(acme, alice, acme_dataset):
    base = {"name": "s", "hypermodel": "dense", "search_space": TINY_SPACE, "objective_metric": "val_loss"}
    with pytest.raises(StudyError, match="Hyperband needs at least 3 epochs"):
        study_create(team=acme, user=alice, dataset=acme_dataset, tuner="hyperband", epochs=2, **base)
    with pytest.raises(StudyError, match="Parallelism: Must be a whole number from 1 to 64"):
        study_create(team=acme, user=alice, dataset=acme_dataset, parallelism=65, **base)
    assert not Study.objects.exists()


def _bayesian(acme, alice, dataset, **options):
    return study_create(team=acme, user=alice, dataset=dataset, name="bayes", hypermodel="dense",
                        search_space=TINY_SPACE, objective_metric="val_loss", tuner="bayesian", **options)


def _complete_trials(study, start, stop):
    for i in range(start, stop):
        Trial.objects.create(study=study, trial_id=str(i), number=i + 1, status=Trial.Status.COMPLETED, score=0.5)


def test_the_study_page_says_while_the_bayesian_tuner_explores_and_when_it_is_guided(
        alice_client, acme, alice, acme_dataset):
    study = _bayesian(acme, alice, acme_dataset, max_trials=24)  # 2 hyperparameters: 6 random trials
    _complete_trials(study, 0, 2)
    page = alice_client.get(reverse("study_detail", args=[study.id]))
    assert shows(page, "Exploring: 2 of 6 initial random trials completed (the default: 3 × the number")
    _complete_trials(study, 2, 6)
    page = alice_client.get(reverse("study_detail", args=[study.id]))
    assert shows(page, "Guided by the Gaussian process since its 6 initial random trials completed.")


def test_a_bayesian_study_that_can_only_explore_says_it_is_a_random_search(alice_client, acme, alice, acme_dataset):
    study = _bayesian(acme, alice, acme_dataset, max_trials=6, initial_random_trials=6)
    page = alice_client.get(reverse("study_detail", args=[study.id]))
    assert shows(page, "this study is a random search")
    other = _bayesian(acme, alice, acme_dataset, max_trials=6, initial_random_trials=2)
    assert not shows(alice_client.get(reverse("study_detail", args=[other.id])), "this study is a random search")


@pytest.fixture
def queued_model(acme_study, acme_trial, alice):
    (model,) = trained_models_request(study=acme_study, user=alice, trials=[acme_trial], method="retrain")
    return model


def test_an_editor_cancels_a_queued_model(alice_client, queued_model):
    page = alice_client.get(reverse("model_detail", args=[queued_model.id]))
    assert 'id="cancel-model"' in page_text(page)
    response = alice_client.post(reverse("model_cancel", args=[queued_model.id]), follow=True)
    assert shows(response, f"Model {queued_model} cancelled.")
    queued_model.refresh_from_db()
    assert queued_model.status == TrainedModel.Status.CANCELLED
    assert 'id="cancel-model"' not in page_text(response)


def test_a_completed_model_cannot_be_cancelled(alice_client, acme_model):
    response = alice_client.post(reverse("model_cancel", args=[acme_model.id]), follow=True)
    assert shows(response, "The model is completed; only a queued or running model can be cancelled.")
    acme_model.refresh_from_db()
    assert acme_model.status == TrainedModel.Status.COMPLETED


def test_a_viewer_cannot_cancel_and_another_team_gets_404(client, bob, charlie, queued_model):
    client.force_login(bob)
    assert 'id="cancel-model"' not in page_text(client.get(reverse("model_detail", args=[queued_model.id])))
    assert client.post(reverse("model_cancel", args=[queued_model.id])).status_code == 403
    client.force_login(charlie)
    assert client.post(reverse("model_cancel", args=[queued_model.id])).status_code == 404
    queued_model.refresh_from_db()
    assert queued_model.status == TrainedModel.Status.QUEUED


def test_finished_results_cannot_be_edited_in_the_admin(client, django_user_model, acme_trial):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    url = reverse("admin:experiments_trial_change", args=[acme_trial.pk])
    page = client.get(url)
    assert page.status_code == 200 and 'name="score"' not in page_text(page) and 'name="notes"' in page_text(page)
    client.post(url, {"notes": "looked at it", "tags": '["checked"]', "score": "0.01"})
    acme_trial.refresh_from_db()
    assert acme_trial.score == 0.9 and acme_trial.notes == "looked at it"
    assert client.get(reverse("admin:experiments_trial_add")).status_code == 403
