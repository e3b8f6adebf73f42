"""Accessibility basics on every page a team uses: each form field has a label (a
<label for>, a wrapping <label> or an aria-label), tables have header cells, and the page
declares its language and a viewport for phones."""

from html.parser import HTMLParser

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

UNLABELLED_TYPES = {"hidden", "submit", "button", "reset", "image"}


class _Fields(HTMLParser):
    def __init__(self):
        super().__init__()
        self.labels_for: set[str] = set()
        self.fields: list[dict] = []
        self.open_labels = 0
        self.tables = self.header_cells = 0
        self.html_lang = self.viewport = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.html_lang = bool(a.get("lang"))
        elif tag == "meta" and a.get("name") == "viewport":
            self.viewport = True
        elif tag == "label":
            self.open_labels += 1
            if a.get("for"):
                self.labels_for.add(a["for"])
        elif tag in ("input", "select", "textarea") and a.get("type") not in UNLABELLED_TYPES:
            self.fields.append({**a, "_tag": tag, "_wrapped": self.open_labels > 0})
        elif tag == "table":
            self.tables += 1
        elif tag == "th":
            self.header_cells += 1

    def handle_endtag(self, tag):
        if tag == "label":
            self.open_labels -= 1

    def unlabelled(self) -> list[str]:
        return [f"{f['_tag']} name={f.get('name')} id={f.get('id')}" for f in self.fields
                if not (f["_wrapped"] or f.get("aria-label") or f.get("id") in self.labels_for)]


def _pages(study, trial, model):
    return [reverse("dashboard"), reverse("dataset_list"), reverse("dataset_upload"), reverse("study_new"),
            reverse("study_list"), reverse("study_detail", args=[study.id]),
            reverse("trial_detail", args=[study.id, trial.pk]), reverse("model_list"),
            reverse("model_detail", args=[model.id]), reverse("ensemble_new"), reverse("leaderboard"),
            reverse("worker_list"), reverse("login")]


def test_every_field_is_labelled_and_tables_have_headers(client, alice, acme_study, acme_trial, acme_model):
    from experiments.models import Study

    Study.objects.filter(pk=acme_study.pk).update(status="completed")
    client.force_login(alice)
    for url in _pages(acme_study, acme_trial, acme_model):
        if url == reverse("login"):
            client.logout()
        parser = _Fields()
        response = client.get(url)
        assert response.status_code == 200, url
        parser.feed(response.content.decode())
        assert parser.unlabelled() == [], url
        assert parser.html_lang and parser.viewport, url
        if parser.tables:
            assert parser.header_cells >= parser.tables, url
