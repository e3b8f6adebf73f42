"""One model, one validation figure: the same number with the same source on the models list,
the model page, the leaderboard, the ensemble picker (where it is what the weights are fitted
on) and the ensemble page; a retrained model shows its search trial's checkpoint, since it
trained on the validation split itself. And one ranking rule, chosen per team on the
leaderboard, ranks the leaderboard and the dashboard alike."""

import csv
import io

import pytest
from django.urls import reverse

from experiments.models import Artifact, Dataset, Team, Trial
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import saved_study
from tests.web.figures_rows import finished_ensemble, finished_model, finished_trial
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db


def _section(page: str, start: str, end: str = "</section>") -> str:
    return page.split(start, 1)[1].split(end, 1)[0]


def _row(page: str, marker: str) -> str:
    return page.split(marker, 1)[1].split("</tr>", 1)[0]


@pytest.fixture
def retrained(acme, alice, acme_study):
    """The issue's model: 0.0366 from its best-epoch detection run, 0.1411 from its trial's checkpoint."""
    trial = finished_trial(acme_study, 1, metrics={"val_loss": 0.1411, "val_accuracy": 0.96, "loss": 0.05})
    return finished_model(acme, alice, acme_study, trial, name="retrained", val={"loss": 0.0366, "accuracy": 0.99},
                          test={"loss": 0.08, "accuracy": 0.97})


@pytest.fixture
def promoted(acme, alice, acme_study):
    trial = finished_trial(acme_study, 2, metrics={"val_loss": 0.2, "val_accuracy": 0.9})
    return finished_model(acme, alice, acme_study, trial, name="promoted", method="promote",
                          val={"loss": 0.2, "accuracy": 0.9}, test={"loss": 0.25, "accuracy": 0.9})


def test_the_models_list_names_each_validation_source_and_the_trial_by_number(alice_client, retrained, promoted):
    page = page_text(alice_client.get(reverse("model_list")))
    retrained_row = _row(page, 'data-model="retrained-v1"')
    assert "loss 0.1411" in retrained_row and "(search-phase checkpoint)" in retrained_row
    assert "0.0366" not in retrained_row and "Trial 1</a>" in retrained_row
    promoted_row = _row(page, 'data-model="promoted-v1"')
    assert "(the trial&#x27;s checkpoint)" in promoted_row and "Trial 2</a>" in promoted_row
    assert "· <a" in retrained_row and ">0</a>" not in page  # never "· 0": trials are named by number


def test_the_ensemble_picker_shows_the_figure_the_weights_will_be_fitted_on(alice_client, acme, retrained, promoted):
    checkpoint = artifact_create(team=acme, kind=Artifact.Kind.CHECKPOINT, filename="t.weights.h5",
                                 fileobj=io.BytesIO(b"weights"))
    Trial.objects.filter(pk=retrained.trial_id).update(checkpoint=checkpoint)  # a trial candidate too
    page = page_text(alice_client.get(reverse("ensemble_new")))
    row = _row(page, f'data-candidate="model:{retrained.id}"')
    weighing = row.split('class="weighing">', 1)[1].split("</td>", 1)[0]
    assert "loss 0.1411" in weighing and "(search-phase checkpoint)" in weighing
    assert "0.0366" not in row and 'class="own"' not in page  # one figure, no second "own" one
    promoted_weighing = _row(page, f'data-candidate="model:{promoted.id}"').split('class="weighing">', 1)[1]
    assert "loss 0.2000" in promoted_weighing and "(the trial&#x27;s checkpoint)" in promoted_weighing
    trial_row = _row(page, f'data-candidate="trial:{retrained.trial_id}"')
    assert "acme study trial 1" in trial_row and "loss 0.1411" in trial_row


def test_the_model_page_shows_the_one_figure_ensembles_weigh_it_by_and_says_why(alice_client, retrained):
    page = page_text(alice_client.get(reverse("model_detail", args=[retrained.id])))
    metrics = _section(page, 'id="model-metrics"', "</table>")
    assert "(search-phase checkpoint)" in metrics and 'data-metric="val_loss">0.1411<' in metrics
    assert "0.0366" not in metrics and "checkpoint_loss" not in metrics
    note = _section(page, 'id="metrics-note">', "</p>")
    assert "the search trial&#x27;s best-epoch checkpoint, trained on train, validated on validation" in note
    assert "trained on train+validation, so no validation figure of its own would be honest" in note


def test_a_promoted_model_needs_no_second_figure(alice_client, promoted):
    page = page_text(alice_client.get(reverse("model_detail", args=[promoted.id])))
    assert "(the trial&#x27;s checkpoint)" in page and "checkpoint_loss" not in page


def test_the_ensemble_page_names_its_members_and_where_their_figures_come_from(
        alice_client, acme, alice, retrained, promoted):
    trial = finished_trial(retrained.study, 3)
    ensemble = finished_ensemble(acme, alice, retrained.dataset, [retrained, promoted, trial], [0.5, 0.3, 0.2])
    page = page_text(alice_client.get(reverse("model_detail", args=[ensemble.id])))
    members = _section(page, 'id="ensemble-members"', "</table>")
    assert "retrained v1" in members and "acme study trial 3" in members and "trial 2<" not in members
    retrained_row = _row(members, "retrained v1")
    assert "0.1411" in retrained_row and "search-phase checkpoint" in retrained_row
    assert "the trial&#x27;s checkpoint" in _row(members, "promoted v1")
    assert "(members&#x27; blend)" in page and "Effectively a single model" not in page
    card = alice_client.get(reverse("model_card", args=[ensemble.id])).json()
    assert [m["label"] for m in card["lineage"]["ensemble"]["members"]] == [
        "retrained v1", "promoted v1", "acme study trial 3"]
    assert card["lineage"]["ensemble"]["members"][0]["validation_source"].startswith("the search trial's")
    assert card["metrics"]["validation_source"].startswith("the weighted blend")


def test_the_leaderboard_names_the_source_of_each_validation_figure(alice_client, retrained, promoted):
    page = page_text(alice_client.get(reverse("leaderboard")))
    assert "(search-phase checkpoint)" in _row(page, 'data-model="retrained-v1"')
    assert "(the trial&#x27;s checkpoint)" in _row(page, 'data-model="promoted-v1"')
    rows = list(csv.DictReader(io.StringIO(page_text(alice_client.get(reverse("leaderboard"), {"format": "csv"})))))
    assert {r["model"]: r["val_source"] for r in rows} == {"retrained": "search-phase checkpoint",
                                                           "promoted": "the trial's checkpoint"}


def test_an_ensemble_of_one_model_shows_that_models_figure_everywhere(alice_client, acme, alice, retrained):
    """The worker fits the weights on the member's checkpoint predictions, so the blend of a
    single member scores what the checkpoint scores: every page shows one number for both."""
    ensemble = finished_ensemble(acme, alice, retrained.dataset, [retrained], [1.0], name="solo",
                                 test=retrained.test_metrics)
    ensemble.val_metrics = {"loss": 0.1411, "accuracy": 0.96}
    ensemble.save(update_fields=["val_metrics"])
    model_page = _section(page_text(alice_client.get(reverse("model_detail", args=[retrained.id]))),
                          'id="model-metrics"', "</table>")
    assert 'data-metric="val_accuracy">0.9600<' in model_page and 'data-metric="val_loss">0.1411<' in model_page
    ensemble_page = page_text(alice_client.get(reverse("model_detail", args=[ensemble.id])))
    member_row = _row(_section(ensemble_page, 'id="ensemble-members"', "</table>"), "retrained v1")
    assert 'data-metric="val_loss">0.1411<' in member_row and "search-phase checkpoint" in member_row
    assert 'data-metric="val_accuracy">0.9600<' in _section(ensemble_page, 'id="model-metrics"', "</table>")
    board = page_text(alice_client.get(reverse("leaderboard")))
    val_cells = {slug: _row(board, f'data-model="{slug}"').split("</td>")[2] for slug in ("retrained-v1", "solo-v1")}
    assert all("0.9600" in cell for cell in val_cells.values()), val_cells
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(page_text(
        alice_client.get(reverse("leaderboard"), {"format": "csv"}))))}
    assert rows["retrained"]["val_accuracy"] == rows["solo"]["val_accuracy"] == "0.96"
    card = alice_client.get(reverse("model_card", args=[retrained.id])).json()
    assert card["metrics"]["validation"] == {"loss": 0.1411, "accuracy": 0.96}


# --- one ranking rule ----------------------------------------------------------------------


def _ranked(response) -> list[str]:
    return [chunk.split('"')[0] for chunk in page_text(response).split('class="leaderboard-row" data-model="')[1:]]


def _dashboard_best(client) -> str:
    best = _section(page_text(client.get(reverse("dashboard"))), 'id="best-models"')
    return best.split('data-model="', 1)[1].split('"', 1)[0]


@pytest.fixture
def wine_ties(acme, alice):
    """The issue's wine board: three models at test accuracy 1.0, told apart by test loss only."""
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    study = saved_study(acme, alice, wine, name="wine study", hypermodel="dense")
    trial = finished_trial(study, 1)
    return [finished_model(acme, alice, study, trial, name="wine", version=v, test=test, minutes_ago=minutes)
            for v, test, minutes in [(1, {"accuracy": 1.0, "loss": 0.09, "mae": 0.3}, 30),
                                     (2, {"accuracy": 1.0, "loss": 0.02, "mae": 0.5}, 60),
                                     (3, {"accuracy": 0.97, "loss": 0.01, "mae": 0.1}, 0)]]


def test_ties_are_broken_by_test_loss_and_the_dashboard_names_the_leaderboards_first(alice_client, wine_ties):
    assert _ranked(alice_client.get(reverse("leaderboard"))) == ["wine-v2", "wine-v1", "wine-v3"]
    assert _dashboard_best(alice_client) == "wine-v2"
    page = page_text(alice_client.get(reverse("leaderboard")))
    assert "ties: the lower test loss, then the better validation figure, then the newest" in page


def test_an_editor_ranks_the_team_by_another_recorded_metric_and_the_dashboard_follows(
        alice_client, acme, wine_ties):
    page = page_text(alice_client.get(reverse("leaderboard")))
    form = _section(page, 'id="ranking-form"', "</form>")
    assert '<option value="mae">test mae (lower is better)</option>' in form
    assert '<option value="accuracy">test accuracy (higher is better)</option>' in form
    response = alice_client.post(reverse("leaderboard"), {"ranking_metric": "mae"}, follow=True)
    assert "The team now ranks models by test mae." in page_text(response)
    assert Team.objects.get(pk=acme.pk).ranking_metric == "mae"
    assert _ranked(alice_client.get(reverse("leaderboard"))) == ["wine-v3", "wine-v1", "wine-v2"]
    assert _dashboard_best(alice_client) == "wine-v3"
    assert "test mae <strong>0.1000</strong>" in page_text(alice_client.get(reverse("dashboard")))
    alice_client.post(reverse("leaderboard"), {"ranking_metric": ""})
    assert Team.objects.get(pk=acme.pk).ranking_metric == ""
    assert _dashboard_best(alice_client) == "wine-v2"


def test_a_metric_no_model_records_is_refused_and_a_viewer_cannot_choose(client, alice_client, acme, bob, wine_ties):
    response = alice_client.post(reverse("leaderboard"), {"ranking_metric": "f1"}, follow=True)
    assert "Rank by a test metric your models record (accuracy, loss, mae), not &#x27;f1&#x27;." in page_text(response)
    client.force_login(bob)
    assert 'id="ranking-form"' not in page_text(client.get(reverse("leaderboard")))
    assert client.post(reverse("leaderboard"), {"ranking_metric": "mae"}).status_code == 403
    assert Team.objects.get(pk=acme.pk).ranking_metric == ""


def test_models_without_the_ranking_metric_go_last(alice_client, acme, alice, acme_study, acme_trial):
    finished_model(acme, alice, acme_study, acme_trial, name="bare", test={})
    finished_model(acme, alice, acme_study, acme_trial, name="good", test={"accuracy": 0.8, "loss": 0.4})
    finished_model(acme, alice, acme_study, acme_trial, name="odd", test={"loss": 0.1})
    assert _ranked(alice_client.get(reverse("leaderboard"))) == ["good-v1", "odd-v1", "bare-v1"]
    assert _dashboard_best(alice_client) == "good-v1"


def test_a_regression_dataset_ranks_by_loss_by_default_and_falls_back_from_a_classification_choice(
        alice_client, acme, alice):
    data = dataset_create_bundled(team=acme, user=alice, bundled_name="wine", name="prices")
    Dataset.objects.filter(pk=data.pk).update(task=Dataset.Task.REGRESSION)
    data.refresh_from_db()
    study = saved_study(acme, alice, data, name="prices study", hypermodel="dense", objective_metric="val_loss",
                        objective_direction="min")
    trial = finished_trial(study, 1, metrics={"val_loss": 2.0})
    for version, loss in [(1, 3.0), (2, 1.5), (3, 2.0)]:
        finished_model(acme, alice, study, trial, name="price", version=version, test={"loss": loss, "mae": loss / 2})
    assert _ranked(alice_client.get(reverse("leaderboard"))) == ["price-v2", "price-v3", "price-v1"]
    Team.objects.filter(pk=acme.pk).update(ranking_metric="accuracy")
    response = alice_client.get(reverse("leaderboard"))
    assert _ranked(response) == ["price-v2", "price-v3", "price-v1"]
    assert "No model of this dataset records test accuracy, so it is ranked by test loss." in page_text(response)
