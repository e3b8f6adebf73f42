"""A study's figures (progress, best trial, what pruning saved) have one definition, read for many
studies at once: the API's study list, the study list page and the dashboard make as many queries
for one study as for many, and show the same counts."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from experiments.models import Study, Trial
from experiments.selectors.studies import studies_progress, study_progress
from experiments.selectors.trials import studies_best_trials, study_best_trial
from tests.web.comparison_rows import scored_study

pytestmark = pytest.mark.django_db


def _studies(team, user, dataset, count: int) -> list[Study]:
    """`count` studies of 3 completed trials and one failed; every other one minimises, and the
    later ones have a trial warm-started from the first study's best (the API shows its source)."""
    studies = []
    for i in range(count):
        direction = "max" if i % 2 == 0 else "min"
        study = scored_study(team, user, dataset, f"study {i}", 3, direction=direction)
        if studies:
            Trial.objects.create(study=study, trial_id="seed", number=10, status=Trial.Status.COMPLETED,
                                 hyperparameters={}, score=0.95, metrics={"val_accuracy": 0.95},
                                 seeded_from=study_best_trial(study=studies[0]))
        studies.append(study)
    return studies


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


def test_the_api_study_list_makes_as_many_queries_for_one_study_as_for_many(alice_api, acme, alice, acme_dataset):
    _studies(acme, alice, acme_dataset, 1)
    one = _queries(alice_api, "/api/v1/studies/")
    _studies(acme, alice, acme_dataset, 6)
    assert alice_api.get("/api/v1/studies/").json()["count"] == 7
    assert _queries(alice_api, "/api/v1/studies/") == one


def test_the_study_pages_make_as_many_queries_for_one_study_as_for_many(alice_client, acme, alice, acme_dataset):
    first = _studies(acme, alice, acme_dataset, 1)
    Study.objects.filter(pk=first[0].pk).update(status=Study.Status.RUNNING)
    before = {name: _queries(alice_client, reverse(name)) for name in ("study_list", "dashboard")}
    for study in _studies(acme, alice, acme_dataset, 5):
        Study.objects.filter(pk=study.pk).update(status=Study.Status.RUNNING)
    assert {name: _queries(alice_client, reverse(name)) for name in ("study_list", "dashboard")} == before


def test_the_api_list_shows_each_studys_own_figures(alice_api, acme, alice, acme_dataset):
    studies = _studies(acme, alice, acme_dataset, 4)
    rows = {row["id"]: row for row in alice_api.get("/api/v1/studies/").json()["results"]}
    for study in studies:
        progress, best = study_progress(study=study), study_best_trial(study=study)
        row = rows[study.id]
        assert row["progress"] == {"completed": progress["completed"], "pruned": 0, "failed": 1, "running": 0,
                                   "total": progress["total"], "max_trials": study.max_trials}
        assert row["best_trial"]["id"] == best.pk and row["best_trial"]["score"] == best.score
        if best.seeded_from_id:
            assert row["best_trial"]["seeded_from"]["trial"] == best.seeded_from_id


def test_the_figures_of_many_studies_are_each_studys_own(acme, alice, acme_dataset):
    studies = _studies(acme, alice, acme_dataset, 4)
    progress, best = studies_progress(studies=studies), studies_best_trials(studies=studies)
    for study in studies:
        trials = Trial.objects.filter(study=study)
        completed = trials.filter(status=Trial.Status.COMPLETED)
        order = "-score" if study.objective_direction == "max" else "score"
        assert best[study.pk] == completed.order_by(order, "number").first()
        assert progress[study.pk]["completed"] == completed.count()
        assert progress[study.pk]["finished"] == trials.count()  # every trial here completed or failed
        assert progress[study.pk]["with_results"] == completed.count()
    assert studies_best_trials(studies=[]) == {}
