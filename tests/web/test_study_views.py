"""The study page's live parts: chart data (history with best so far, curves, parallel
coordinates of varying hyperparameters, importance, ETA), comparing trials, notes and tags,
the trials CSV; and query counts that do not grow with the number of trials."""

import csv
import io

import pytest
from django.urls import reverse
from django.utils import timezone

from experiments.models import Study, Trial, TrialEpoch, Worker
from experiments.presentation import study_charts
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db


def _trials(study, count, start=1):
    """Finished trials whose score depends on the learning rate only."""
    trials = []
    for number in range(start, start + count):
        lr = [0.001, 0.01, 0.1][number % 3]
        trial = Trial.objects.create(
            study=study, trial_id=f"{number:03d}", number=number, status=Trial.Status.COMPLETED,
            hyperparameters={"units": 8 * (number % 2 + 1), "learning_rate": lr, "fixed": 1},
            score={0.001: 0.7, 0.01: 0.9, 0.1: 0.5}[lr] + number * 1e-4, best_epoch=2, duration_seconds=10.0)
        TrialEpoch.objects.bulk_create([TrialEpoch(trial=trial, epoch=e, metrics={"loss": 1 / (e + 1),
                                                                                  "val_loss": 1.2 / (e + 1)})
                                        for e in range(3)])
        trials.append(trial)
    return trials


def test_chart_data_draws_history_curves_parallel_coordinates_and_importance(alice_client, acme_study):
    _trials(acme_study, 12)
    data = alice_client.get(reverse("study_chart_data", args=[acme_study.id])).json()
    history = data["history"]
    assert history["number"] == list(range(1, 13))
    best = [b for b in history["best"] if b is not None]
    assert best == sorted(best) and best[-1] == max(history["score"])  # val_accuracy is maximised
    assert len(data["curves"]) == 10 and data["curves"][0]["epoch"] == [1, 2, 3]
    parallel = data["parallel"]
    assert [d["name"] for d in parallel["dimensions"]] == ["learning_rate", "units"]  # "fixed" never varies
    assert parallel["order"] == ["learning_rate", "units"]  # by importance: the score depends on lr only
    learning_rate = parallel["dimensions"][0]
    assert learning_rate["log"] and learning_rate["ticktext"] == ["0.001", "0.01", "0.1"]  # log-sampled
    assert len(parallel["score"]["values"]) == 12
    assert data["importance"][0]["name"] == "learning_rate"
    assert sum(row["importance"] for row in data["importance"]) == pytest.approx(1.0, abs=1e-3)
    assert data["eta_seconds"] is None  # the study is not running


def _worker(queue: str, concurrency: int, name: str = "w1@h") -> Worker:
    return Worker.objects.create(name=name, hostname="h", pid=1, queues=[queue], concurrency=concurrency)


def test_the_eta_uses_observed_durations_and_the_slots_the_queue_has(alice_client, acme_study):
    _trials(acme_study, 4)
    Study.objects.filter(pk=acme_study.pk).update(status=Study.Status.RUNNING, max_trials=10, parallelism=2)
    _worker(acme_study.queue, 2)
    data = alice_client.get(reverse("study_chart_data", args=[acme_study.id])).json()
    assert data["eta_seconds"] == 30.0  # 6 remaining, 2 at a time, 10 s each
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    assert "about 30 s left" in page and 'id="capacity"' not in page
    Worker.objects.update(concurrency=1)  # the queue has one slot: the page says so, the ETA doubles
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    assert "about 1 min left" in page
    assert "Parallelism 2, but 1 slot on queue <strong>cpu</strong>" in page and "raise its concurrency" in page
    Worker.objects.update(stopped=timezone.now())  # no worker at all: no ETA, and a different notice
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    assert 'id="eta"' not in page and 'id="no-live-worker"' in page and 'id="capacity"' not in page


def test_the_eta_counts_what_running_trials_have_left():
    # Two slots, two trials running for 8 s and 2 s of a 10 s median, 3 not started:
    # slot A frees at 2 s, slot B at 8 s; A takes 2 more (ends 12 s, 22 s), B one (18 s).
    assert study_charts.eta_seconds(durations=[10.0] * 5, remaining=3, running_elapsed=[8.0, 2.0], slots=2) == 22.0
    # A trial already past the median is given at least a second.
    assert study_charts.eta_seconds(durations=[10.0], remaining=0, running_elapsed=[30.0], slots=1) == 1.0
    assert study_charts.eta_seconds(durations=[10.0], remaining=4, running_elapsed=[], slots=0) is None
    assert study_charts.eta_seconds(durations=[], remaining=4, running_elapsed=[], slots=2) is None


def test_long_histories_are_downsampled_but_keep_every_improvement():
    trials = [{"number": i, "score": float(i % 97) + i / 1e6, "trial_id": str(i)} for i in range(10_000)]
    history = study_charts.history(trials, "max")
    assert history["total"] == 10_000 and history["shown"] <= study_charts.MAX_HISTORY_POINTS + 200
    improvements = {i for i in range(1, 10_000) if trials[i]["score"] > max(t["score"] for t in trials[:i])}
    assert improvements <= set(history["number"])
    assert history["best"][-1] == max(t["score"] for t in trials)


@pytest.mark.parametrize("name", ["study_detail", "study_chart_data", "study_live"])
def test_query_counts_do_not_grow_with_trials(alice_client, acme_study, django_assert_max_num_queries, name):
    url = reverse(name, args=[acme_study.id])
    _trials(acme_study, 3)
    with django_assert_max_num_queries(40) as few:
        alice_client.get(url)
    _trials(acme_study, 60, start=4)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert alice_client.get(url).status_code == 200


def test_the_trial_table_shows_a_bounded_number_of_rows_and_says_so(alice_client, acme_study):
    _trials(acme_study, 120)
    page = page_text(alice_client.get(reverse("study_detail", args=[acme_study.id])))
    assert page.count('class="trial-row') == 100
    assert "Showing 100 of 120 trials" in page


def test_comparing_two_to_four_trials_side_by_side(alice_client, acme_study):
    trials = _trials(acme_study, 5)
    url = reverse("study_compare", args=[acme_study.id])
    response = alice_client.get(url, {"trials": [trials[0].pk, trials[1].pk]})
    assert response.status_code == 200
    text = page_text(response)
    # Named by start order (1-based), as everywhere: not by KerasTuner's zero-padded ids.
    assert "Trial 1<" in text and "Trial 2<" in text and "Trial 001" not in text and "learning_rate" in text
    for picked in ([trials[0].pk], [t.pk for t in trials]):
        response = alice_client.get(url, {"trials": picked}, follow=True)
        assert shows(response, "Pick between 2 and 4 trials of this study to compare.")


def test_notes_and_tags_are_saved_and_shown_and_validated(alice_client, acme_study, acme_trial):
    url = reverse("trial_annotate", args=[acme_study.id, acme_trial.pk])
    alice_client.post(url, {"notes": "Looks promising", "tags": "Promising, overfits, promising"})
    acme_trial.refresh_from_db()
    assert (acme_trial.notes, acme_trial.tags) == ("Looks promising", ["promising", "overfits"])
    assert acme_trial.score == 0.9  # results untouched
    assert '<span class="tag">overfits</span>' in page_text(alice_client.get(reverse("study_detail",
                                                                                    args=[acme_study.id])))
    response = alice_client.post(url, {"notes": "", "tags": ",".join(f"t{i}" for i in range(11))}, follow=True)
    assert shows(response, "A trial takes at most 10 tags; you gave 11.")
    acme_trial.refresh_from_db()
    assert acme_trial.tags == ["promising", "overfits"]


def test_a_viewer_cannot_annotate(client, bob, acme_study, acme_trial):
    client.force_login(bob)
    response = client.post(reverse("trial_annotate", args=[acme_study.id, acme_trial.pk]), {"notes": "x"})
    assert response.status_code == 403
    acme_trial.refresh_from_db()
    assert acme_trial.notes == ""


def test_the_trials_csv_has_every_trial_with_its_values(alice_client, acme_study):
    _trials(acme_study, 7)
    response = alice_client.get(reverse("study_trials_csv", args=[acme_study.id]))
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["number"] for r in rows] == [str(i) for i in range(1, 8)]
    assert rows[0]["learning_rate"] == "0.01" and rows[0]["val_accuracy"]


def test_csv_cells_that_look_like_formulas_open_as_text(alice_client, acme_study, acme_trial):
    alice_client.post(reverse("trial_annotate", args=[acme_study.id, acme_trial.pk]),
                      {"notes": "=HYPERLINK(\"http://evil\")", "tags": ""})
    rows = list(csv.DictReader(io.StringIO(
        alice_client.get(reverse("study_trials_csv", args=[acme_study.id])).content.decode())))
    assert rows[0]["notes"] == "'=HYPERLINK(\"http://evil\")"
