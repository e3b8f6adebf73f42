"""Comparing two to four studies of one dataset: picked on the studies list, the page shows
their histories by trial number, their best trials side by side and each one's hyperparameter
importance; every other selection (too few, too many, other datasets, ids that are not ids) is
refused with a message, another team's studies are 404, and the queries do not grow with the
number of trials."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments.presentation import importance
from experiments.services.datasets import dataset_create_bundled
from tests.integration.helpers import saved_study
from tests.web.comparison_rows import scored_study
from tests.web.pages import json_script, page_text, shows

pytestmark = pytest.mark.django_db
URL = reverse("studies_compare")
PICK = "Pick between 2 and 4 studies of one dataset to compare; you picked {n}."


@pytest.fixture
def pair(acme, alice, acme_dataset):
    """Two studies of iris: eight scored trials, and three (too few for importance)."""
    return (scored_study(acme, alice, acme_dataset, "lr sweep", 8),
            scored_study(acme, alice, acme_dataset, "short run", 3, extra={"dropout": 0.25},
                         score=lambda number, values: 0.6 + number / 100))


def _compare(client, *ids, follow=False):
    return client.get(URL, {"studies": [str(i) for i in ids]}, follow=follow)


def test_the_studies_list_offers_ticking_studies_to_compare(alice_client, pair):
    text = page_text(alice_client.get(reverse("study_list")))
    assert f'action="{URL}"' in text
    for study in pair:
        assert f'name="studies" value="{study.id}" aria-label="Compare {study.name}"' in text
    assert ">Compare</button>" in text


def test_the_page_shows_histories_best_trials_and_importance(alice_client, pair):
    sweep, short = pair
    response = _compare(alice_client, sweep.id, short.id)
    assert response.status_code == 200
    text = page_text(response)

    table = text.split('id="best-trials-table"')[1].split("</table>")[0]
    for study in pair:
        assert f'<a href="{reverse("study_detail", args=[study.id])}">{study.name}</a>' in table
    best_sweep = sweep.trials.get(number=7)  # learning rate 0.01 scores 0.9; trial 7 beats trial 4 and 1
    best_short = short.trials.get(number=3)
    assert f'<a href="{reverse("trial_detail", args=[sweep.id, best_sweep.pk])}">Trial 7</a>' in table
    assert f'<a href="{reverse("trial_detail", args=[short.id, best_short.pk])}">Trial 3</a>' in table
    assert "8 of 9" in table and "3 of 4" in table  # the failed trial counts in the total only
    assert "Random search" in table and "dense" in table
    assert "0.9001" in table and "0.6300" in table  # the figure filter: 0.90007 and 0.63
    assert '<span class="tag">best</span>' in table.split("0.9001")[1].split("</td>")[0]
    dropout = table.split("<th scope=\"row\">dropout</th>")[1].split("</tr>")[0]
    assert dropout == "<td></td><td>0.2500</td>"  # blank for the study without it
    assert "<th scope=\"row\">activation</th><td>gelu</td><td>tanh</td>" in table
    assert "<th scope=\"row\">learning_rate</th><td>0.0100</td><td>0.0010</td>" in table

    chart = json_script(response, "compare-data")
    assert [s["name"] for s in chart["studies"]] == ["lr sweep", "short run"]
    history = chart["studies"][0]["history"]
    assert history["number"] == list(range(1, 9))
    assert history["score"][:3] == pytest.approx([0.90001, 0.50002, 0.70003])  # learning rates 0.01, 0.1, 0.001
    assert history["best"] == pytest.approx([0.90001] * 3 + [0.90004] * 3 + [0.90007] * 2)  # maximised
    assert chart["objectives"] == [{"metric": "val_accuracy", "direction": "max", "studies": [sweep.id, short.id]}]

    assert shows(response, importance.METHOD)
    sweep_importance = text.split(f'class="card importance" data-study="{sweep.id}"')[1].split("</section>")[0]
    rows = sweep_importance.split("<tbody>")[1]
    assert rows.index("learning_rate") < rows.index("activation") < rows.index("layers")
    assert "0%" in rows.split("layers")[1].split("</tr>")[0]
    assert "From 8 completed trials." in sweep_importance
    short_importance = text.split(f'class="card importance" data-study="{short.id}"')[1].split("</section>")[0]
    assert "Not enough trials: importance needs at least 5 completed trials" in short_importance
    assert "objectives-differ" not in text
    assert 'src="/static/plotly/plotly.min.js"' in text and "cdn" not in text.lower()


def test_studies_with_different_objectives_are_drawn_on_their_own_axes_and_none_is_called_best(
        alice_client, acme, alice, acme_dataset, pair):
    losses = scored_study(acme, alice, acme_dataset, "by loss", 6, objective="val_loss", direction="min",
                          score=lambda number, values: 1.0 / number)
    response = _compare(alice_client, pair[0].id, losses.id)
    assert response.status_code == 200
    assert shows(response, "These studies optimise different objectives")
    assert "val_accuracy, maximised; val_loss, minimised" in page_text(response)
    assert '<span class="tag">best</span>' not in page_text(response)
    chart = json_script(response, "compare-data")
    assert [g["metric"] for g in chart["objectives"]] == ["val_accuracy", "val_loss"]
    assert chart["studies"][1]["history"]["best"][-1] == pytest.approx(1 / 6)  # minimised


@pytest.mark.parametrize("picked", ["one", "five", "none"])
def test_fewer_than_two_or_more_than_four_studies_are_refused_with_a_message(
        alice_client, acme, alice, acme_dataset, pair, picked):
    extra = [saved_study(acme, alice, acme_dataset, name=f"extra {i}", hypermodel="dense") for i in range(3)]
    ids = {"one": [pair[0].id], "five": [*[s.id for s in pair], *[s.id for s in extra]], "none": []}[picked]
    response = _compare(alice_client, *ids, follow=True)
    assert response.redirect_chain == [(reverse("study_list"), 302)]
    assert shows(response, PICK.format(n=len(ids)))


def test_the_same_study_twice_counts_once(alice_client, pair):
    response = _compare(alice_client, pair[0].id, pair[0].id, follow=True)
    assert shows(response, PICK.format(n=1))


def test_studies_of_different_datasets_are_refused_with_a_message(alice_client, acme, alice, pair):
    wine = dataset_create_bundled(team=acme, user=alice, bundled_name="wine")
    on_wine = saved_study(acme, alice, wine, name="wine study", hypermodel="dense")
    response = _compare(alice_client, pair[0].id, on_wine.id, follow=True)
    assert response.redirect_chain == [(reverse("study_list"), 302)]
    assert shows(response, "Only studies of one dataset can be compared: 'lr sweep' uses iris; 'wine study' uses "
                           f"{wine.name}.")


@pytest.mark.parametrize("garbage", ["abc", "²", "1²", "-3", "0", "1.0", "0x1f", " ", "9" * 30, "9" * 5000,
                                     "1;2", "\u0663", "%00", "1e3"])
def test_garbage_ids_are_refused_with_a_message_never_a_server_error(alice_client, pair, garbage):
    response = alice_client.get(URL, {"studies": [str(pair[0].id), garbage]}, follow=True)
    assert response.status_code == 200
    if garbage.strip():
        assert shows(response, "Studies are picked by their ids, whole numbers;")
    else:  # a blank id is no id: one study is left
        assert shows(response, PICK.format(n=1))


def test_a_raw_query_string_of_nonsense_is_refused_too(alice_client, pair):
    for query in ("studies=%C2%B2&studies=%C2%B2", "studies", "studies=&&&", "studies[]=1&studies[]=2",
                  f"studies={pair[0].id},{pair[1].id},x"):
        response = alice_client.get(f"{URL}?{query}")
        assert response.status_code == 302, query
    assert alice_client.get(f"{URL}?studies={pair[0].id},,{pair[1].id}").status_code == 200


def test_another_teams_studies_are_404_alone_or_mixed_with_your_own(client, charlie, globex, pair):
    client.force_login(charlie)
    assert _compare(client, pair[0].id, pair[1].id).status_code == 404
    own = scored_study(globex, charlie, dataset_create_bundled(team=globex, user=charlie, bundled_name="iris"),
                       "globex study", 5)
    response = _compare(client, own.id, pair[0].id)
    assert response.status_code == 404
    assert "lr sweep" not in page_text(response)


def test_a_viewer_of_the_team_may_compare(client, bob, pair):
    client.force_login(bob)
    assert _compare(client, *[s.id for s in pair]).status_code == 200


def _queries(client, ids) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert _compare(client, *ids).status_code == 200
    return len(captured)


def test_the_queries_do_not_grow_with_the_number_of_trials(alice_client, acme, alice, acme_dataset):
    small = [scored_study(acme, alice, acme_dataset, f"small {i}", 6) for i in range(4)]
    large = [scored_study(acme, alice, acme_dataset, f"large {i}", 400) for i in range(4)]

    few, many = _queries(alice_client, [s.id for s in small]), _queries(alice_client, [s.id for s in large])

    assert few == many
    # Session, user, membership (twice: the request's team and the page's team menu), the
    # studies, and the comparison's own three: trial rows, the importance sample's
    # hyperparameters, the best trials' figures.
    assert many == 8, many


def test_comparing_trials_of_one_study_survives_superscript_and_overlong_ids_too(alice_client, pair):
    sweep = pair[0]
    first, second = sweep.trials.filter(status="completed").order_by("number")[:2]
    url = reverse("study_compare", args=[sweep.id])
    for garbage in ("²", "1²", "9" * 5000):
        response = alice_client.get(url, {"trials": [first.pk, garbage]}, follow=True)
        assert shows(response, "Pick between 2 and 4 trials of this study to compare.")
    assert alice_client.get(url, {"trials": [first.pk, second.pk, "²"]}).status_code == 200
