"""A new study gets a fresh random seed, shown on the form: two studies of the same settings no
longer repeat each other (every one used to default to seed 1). A seed typed in is kept, a clone
keeps its original's, and an empty one is drawn when the study is saved."""

import re

import pytest
from django.urls import reverse

from experiments.models import Study
from experiments.tuning.reproducibility import FRESH_SEEDS
from tests.web.pages import page_text, shows
from tests.web.test_study_form import _form, _post

pytestmark = pytest.mark.django_db


def _shown_seed(client, url: str) -> int:
    page = page_text(client.get(url))
    tag = re.search(r'<input[^>]*name="seed"[^>]*>', page).group(0)
    return int(re.search(r'value="(\d+)"', tag).group(1))


def test_two_new_study_forms_show_different_seeds(alice_client, acme_dataset):
    seeds = {_shown_seed(alice_client, reverse("study_new")) for _ in range(3)}
    assert len(seeds) == 3 and all(0 <= seed < FRESH_SEEDS for seed in seeds)


def test_the_seed_on_the_form_is_the_studys(alice_client, acme_dataset):
    seed = _shown_seed(alice_client, reverse("study_new"))
    assert _post(alice_client, _form(acme_dataset, button="save", seed=seed)).status_code == 302
    assert Study.objects.get().seed == seed


def test_an_emptied_seed_is_drawn_at_random_and_recorded(alice_client, acme_dataset):
    for name in ("first", "second"):
        assert _post(alice_client, _form(acme_dataset, button="save", name=name, seed="")).status_code == 302
    first, second = (Study.objects.get(name=name).seed for name in ("first", "second"))
    assert first != second
    page = page_text(alice_client.get(reverse("study_detail", args=[Study.objects.get(name="first").id])))
    assert f"seed {first}" in page


def test_a_clone_keeps_its_originals_seed(alice_client, acme_study):
    Study.objects.filter(pk=acme_study.pk).update(seed=424242)
    assert _shown_seed(alice_client, reverse("study_clone", args=[acme_study.id])) == 424242
    clone_form = alice_client.get(reverse("study_clone", args=[acme_study.id]))
    assert shows(clone_form, "The original study's seed, kept by the clone")
    assert not shows(clone_form, "Drawn at random")
