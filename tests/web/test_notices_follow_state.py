"""Notices that describe a state disappear when the state is over: the "…started." message is
not shown beside a study that has already ended, the live part removes it from an open page
when the study ends, and the pruning savings wait until the pruner has stopped a trial."""

import pytest
from django.urls import reverse

from experiments.models import Study
from tests.web.pages import page_text
from tests.web.pruning_rows import pruned_trial

pytestmark = pytest.mark.django_db


def _complete(study) -> None:
    Study.objects.filter(pk=study.pk).update(status=Study.Status.COMPLETED)


def test_the_started_message_shows_while_the_study_runs(alice_client, acme_study):
    response = alice_client.post(reverse("study_start", args=[acme_study.id]), follow=True)
    page = page_text(response)
    assert "Study started." in page
    assert 'class="flash flash-success while-running"' in page  # the live part can find it


def test_the_started_message_is_not_shown_beside_a_study_that_already_ended(alice_client, acme_study):
    alice_client.post(reverse("study_start", args=[acme_study.id]))
    _complete(acme_study)  # the study ended before the user's browser followed the redirect
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    assert "Study started." not in page
    assert '<span class="badge status-completed" id="study-status">Completed</span>' in page


def test_other_messages_stay_when_the_study_is_not_running(alice_client, acme_running_study):
    alice_client.post(reverse("study_cancel", args=[acme_running_study.id]))
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_running_study.id])))
    assert "Study cancelled; running trials stop at the end of their current epoch." in page


def test_the_live_part_removes_running_notices_once_the_study_ended(alice_client, acme_running_study):
    url = reverse("study_live", args=[acme_running_study.id]) + "?seen=running"
    running = page_text(alice_client.get(url, headers={"HX-Request": "true"}))
    assert "delete:.flash.while-running" not in running
    _complete(acme_running_study)
    ended = page_text(alice_client.get(url, headers={"HX-Request": "true"}))
    assert '<div hidden hx-swap-oob="delete:.flash.while-running"></div>' in ended


def test_a_new_study_started_from_the_form_tags_its_message(alice_client, acme_dataset):
    from tests.web.test_pruning_pages import _form

    response = alice_client.post(reverse("study_new"), {**_form(acme_dataset), "start": "1"}, follow=True)
    assert 'class="flash flash-success while-running"' in page_text(response)
    saved = alice_client.post(reverse("study_new"), {**_form(acme_dataset, name="second")}, follow=True)
    assert "Study second saved." in page_text(saved) and "while-running" not in page_text(saved)


def test_the_pruning_savings_wait_until_a_trial_was_stopped_early(alice_client, acme_study):
    Study.objects.filter(pk=acme_study.pk).update(pruner="median", epochs=10)
    url = reverse("study_detail", args=[acme_study.id])
    page = page_text(alice_client.get(url))
    assert "pruning-savings" not in page and "Pruning saved" not in page
    acme_study.refresh_from_db()
    pruned_trial(acme_study, 1, epoch=2, score=0.5)
    assert "Pruning saved <strong>8 CPU-epochs</strong> by stopping 1 trial early." in page_text(alice_client.get(url))
