"""Warnings where a limit, not the data, decided a result: trials still improving at the
study's last epoch (trial page, trials table, study page), a retrain whose best epoch was the
cap, an ensemble that is one member; and the retrain epoch cap's default from the study."""

import re

import pytest
from django.urls import reverse

from experiments.models import Study
from tests.web.figures_rows import finished_ensemble, finished_model, finished_trial
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db

STILL_IMPROVING = "Still improving at the last epoch: more epochs may help."


def _study_with_epochs(study, epochs):
    Study.objects.filter(pk=study.pk).update(epochs=epochs)
    study.refresh_from_db()
    return study


def test_a_trial_whose_best_epoch_was_the_last_says_it_was_still_improving(alice_client, acme_study):
    study = _study_with_epochs(acme_study, 10)
    improving, settled = finished_trial(study, 1, best_epoch=10), finished_trial(study, 2, best_epoch=6)
    page = page_text(alice_client.get(reverse("trial_detail", args=[study.id, improving.id])))
    assert STILL_IMPROVING in page and "Its best epoch was 10, the study's last (10)." in page
    assert STILL_IMPROVING not in page_text(alice_client.get(reverse("trial_detail", args=[study.id, settled.id])))
    table = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    assert "still improving</span>" in table.split('data-trial="1"')[1].split("</tr>")[0]
    assert "still improving</span>" not in table.split('data-trial="2"')[1].split("</tr>")[0]


def test_the_study_page_warns_when_all_or_most_trials_stopped_at_the_last_epoch(alice_client, acme_study):
    study = _study_with_epochs(acme_study, 10)
    for number in range(1, 9):  # the issue's study: all 8 trials' best epoch was the last
        finished_trial(study, number, best_epoch=10)
    page = page_text(alice_client.get(reverse("study_detail", args=[study.id])))
    assert ("All 8 completed trials had their best epoch at the last epoch (10): they were still improving. "
            "More epochs may help.") in page
    for number in range(9, 17):
        finished_trial(study, number, best_epoch=4)
    assert 'id="study-still-improving"' not in page_text(alice_client.get(reverse("study_detail", args=[study.id])))


def test_a_retrain_whose_best_epoch_was_the_cap_says_raise_it(alice_client, acme, alice, acme_study, acme_trial):
    capped = finished_model(acme, alice, acme_study, acme_trial, name="capped", best_epoch=100, epoch_cap=100)
    fine = finished_model(acme, alice, acme_study, acme_trial, name="fine", best_epoch=37, epoch_cap=100)
    message = "The best epoch was the cap (100): the model was still improving when detection stopped; raise it."
    assert message in page_text(alice_client.get(reverse("model_detail", args=[capped.id])))
    assert "raise it" not in page_text(alice_client.get(reverse("model_detail", args=[fine.id])))
    listing = page_text(alice_client.get(reverse("model_list")))
    assert "cap reached" in listing.split('data-model="capped-v1"')[1].split("</tr>")[0]
    assert "cap reached" not in listing.split('data-model="fine-v1"')[1].split("</tr>")[0]
    assert "cap reached" in page_text(alice_client.get(reverse("leaderboard"))).split('data-model="capped-v1"')[1]
    card = alice_client.get(reverse("model_card", args=[capped.id])).json()
    assert card["warnings"] == [message]


def test_an_ensemble_that_one_member_carries_says_it_is_effectively_that_model(
        alice_client, acme, alice, acme_study, acme_trial):
    members = [finished_model(acme, alice, acme_study, acme_trial, name="m", version=v) for v in (1, 2, 3)]
    lopsided = finished_ensemble(acme, alice, acme_study.dataset, members, [1.0, 0.0, 0.0], name="lopsided")
    page = page_text(alice_client.get(reverse("model_detail", args=[lopsided.id])))
    assert "Effectively a single model: m v1 carries at least 99% of the weight." in page
    assert "carries the ensemble" in page.split('id="ensemble-members"')[1].split("m v2")[0]
    # The members without weight are not in the downloads, and both the page and the card say so.
    rows = page.split('id="ensemble-members"')[1]
    assert rows.count("dropped: weight 0, not in the downloads") == 2
    assert "dropped" not in rows.split("m v2")[0]
    card = alice_client.get(reverse("model_card", args=[lopsided.id])).json()
    assert card["lineage"]["ensemble"]["dropped_members"] == ["m v2", "m v3"]
    even = finished_ensemble(acme, alice, acme_study.dataset, members, [0.4, 0.35, 0.25], name="even")
    even_page = page_text(alice_client.get(reverse("model_detail", args=[even.id])))
    assert "Effectively a single model" not in even_page and "dropped: weight 0" not in even_page
    board = page_text(alice_client.get(reverse("leaderboard")))
    assert "≈ one member" in board.split('data-model="lopsided-v1"')[1].split("</tr>")[0]
    assert "≈ one member" not in board.split('data-model="even-v1"')[1].split("</tr>")[0]


def _epoch_cap_input(page: str) -> str:
    return re.search(r'<input type="number" name="epoch_cap"[^>]*>', page).group(0)


@pytest.mark.parametrize("epochs, cap", [(2, 10), (20, 60), (500, 1000)])
def test_the_retrain_epoch_cap_defaults_from_the_study(alice_client, acme_study, acme_trial, epochs, cap):
    study = _study_with_epochs(acme_study, epochs)
    for page in (page_text(alice_client.get(reverse("study_detail", args=[study.id]))),
                 page_text(alice_client.get(reverse("trial_detail", args=[study.id, acme_trial.id])))):
        assert f'value="{cap}"' in _epoch_cap_input(page)
        assert (f"Defaults to 3 × the study&#x27;s {epochs} epochs (at least 10, at most 1000): {cap}. If the best "
                "epoch found is the cap, the model was still improving: raise it.") in page
