"""The ensemble recipe page: members of one dataset, two or more, all of the team; each bad
pick says why and saves nothing."""

import pytest
from django.urls import reverse

from experiments.models import EnsembleMember, TrainedModel
from experiments.services.datasets import dataset_create_bundled
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db


def _copy(model, **changes) -> TrainedModel:
    fields = {f.name: getattr(model, f.name) for f in TrainedModel._meta.concrete_fields if f.name != "id"}
    return TrainedModel.objects.create(**{**fields, **changes})


@pytest.fixture
def second_model(acme_model):
    return _copy(acme_model, version=2)


def _post(client, *members, **fields):
    return client.post(reverse("ensemble_new"), {"members": [f"model:{m.id}" for m in members],
                                                 "method": "nelder_mead", **fields})


def test_the_page_lists_finished_models_by_dataset_with_their_metrics(alice_client, acme_model, second_model):
    page = page_text(alice_client.get(reverse("ensemble_new")))
    assert "acme-model v1" in page and "acme-model v2" in page and "0.8750" in page
    assert "never trained on the validation split" in page


def test_two_members_of_one_dataset_make_a_queued_ensemble(alice_client, acme_model, second_model):
    response = _post(alice_client, acme_model, second_model, name="pair")
    ensemble = TrainedModel.objects.get(kind="ensemble")
    assert response.status_code == 302 and response["Location"] == reverse("model_detail", args=[ensemble.id])
    assert (ensemble.name, ensemble.version, ensemble.status, ensemble.method) == ("pair", 1, "queued", "nelder_mead")
    assert [m.model_id for m in EnsembleMember.objects.filter(ensemble=ensemble)] == [acme_model.id, second_model.id]
    assert ensemble.dataset_id == acme_model.dataset_id


@pytest.mark.parametrize("case, message", [
    ("one member", "Pick at least two members"),
    ("two datasets", "trained on different datasets"),
    ("unfinished member", "has not completed"),
    ("zero rounds", "Greedy rounds must be a whole number from 1 to 1,000"),
    ("bad name", "may hold only lower-case letters"),
    ("not a number", "must be a whole number"),
])
def test_bad_recipes_say_why_and_save_nothing(alice_client, acme, alice, acme_model, second_model, case, message):
    members, fields = [acme_model, second_model], {}
    if case == "one member":
        members = [acme_model]
    elif case == "two datasets":
        wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
        members = [acme_model, _copy(acme_model, version=3, dataset=wine)]
    elif case == "unfinished member":
        members = [acme_model, _copy(acme_model, version=3, status="running")]
    elif case == "zero rounds":
        fields = {"method": "greedy", "greedy_rounds": "0"}
    elif case == "bad name":
        fields = {"name": "My Ensemble"}
    elif case == "not a number":
        fields = {"seed": "seven"}
    before = TrainedModel.objects.count()
    response = _post(alice_client, *members, **fields)
    assert response.status_code == 200 and shows(response, message)
    assert TrainedModel.objects.count() == before and not EnsembleMember.objects.exists()


def test_another_teams_member_is_not_found(client, charlie, globex, acme_model):
    client.force_login(charlie)
    own = dataset_create_bundled(team=globex, user=charlie, bundled_name="iris")
    theirs = _copy(acme_model, team=globex, dataset=own, name="theirs")
    response = _post(client, theirs, acme_model)
    assert shows(response, f"Member model:{acme_model.id} was not found in this team.")
    assert not TrainedModel.objects.filter(kind="ensemble").exists()
    assert "acme-model" not in page_text(client.get(reverse("ensemble_new")))


def test_a_viewer_cannot_build_ensembles(client, bob, acme_model, second_model):
    client.force_login(bob)
    assert _post(client, acme_model, second_model).status_code == 403
    assert not TrainedModel.objects.filter(kind="ensemble").exists()
