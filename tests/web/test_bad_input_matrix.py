"""Bad input, as an attacker or a careless user types it, over every form and query
parameter: never a 500, a clear message where a person can act on it, and nothing saved
(no row added, no file left). One case per line; `message` is what the page must say."""

import io
import json
from dataclasses import dataclass, field

import numpy as np
import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.models import Artifact, Dataset, Study, TrainedModel, Trial
from tests.integration.helpers import TINY_SPACE
from tests.web.pages import page_text

pytestmark = pytest.mark.django_db

HUGE = str(10**30)
DIGITS_25 = "1" * 25
SUPERSCRIPT_TWO = "\u00b2"


def _row(name, type_, **spec):
    return {"name": name, "type": type_, "parent": None, "parent_values": [], **spec}


def study_form(f, **fields):
    data = {
        "name": "bad input study", "dataset": f.dataset.id, "hypermodel": "dense",
        "search_space": json.dumps(TINY_SPACE), "tuner": "random", "objective_metric": "val_accuracy",
        "objective_direction": "auto", "max_trials": 5, "executions_per_trial": 1, "epochs": 4,
        "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu", "parallelism": 1, "save": "1",
    }
    data.update(fields)
    return data


def space(*rows):
    return json.dumps(list(rows))


def csv_file(name="data.csv", rows=40):
    lines = ["a,b,label"] + [f"{i},{i * 2},{i % 2}" for i in range(rows)]
    return SimpleUploadedFile(name, "\n".join(lines).encode(), content_type="text/csv")


def upload_form(**fields):
    data = {"name": "uploaded", "kind": "auto", "target_column": "label", "task": "auto",
            "val_fraction": 0.15, "test_fraction": 0.15, "seed": 0, "file": csv_file()}
    data.update(fields)
    return data


def bundled_form(**fields):
    return {"bundled": "1", "bundled_name": "iris", "val_fraction": 0.15, "test_fraction": 0.15, "seed": 0,
            **fields}


@dataclass
class Case:
    id: str
    method: str
    url: object  # fixtures -> url
    data: object = None  # fixtures -> dict
    message: str | None = None
    status: tuple = (200, 302, 400, 404)
    follow: bool = True
    extra: dict = field(default_factory=dict)


def nested(depth):
    return "[" * depth + "]" * depth


CASES = [
    # --- the new-study form: every number and the search space ------------------------------
    Case("study-seed-huge", "post", lambda f: reverse("study_new"), lambda f: study_form(f, seed=HUGE),
         "Ensure this value is less than or equal to"),
    Case("study-seed-negative", "post", lambda f: reverse("study_new"), lambda f: study_form(f, seed=-1),
         "greater than or equal to"),
    Case("study-max-trials-huge", "post", lambda f: reverse("study_new"), lambda f: study_form(f, max_trials=HUGE),
         "less than or equal to"),
    Case("study-max-trials-zero", "post", lambda f: reverse("study_new"), lambda f: study_form(f, max_trials=0),
         "greater than or equal to"),
    Case("study-epochs-text", "post", lambda f: reverse("study_new"), lambda f: study_form(f, epochs="ten"),
         "Enter a whole number."),
    Case("study-batch-huge", "post", lambda f: reverse("study_new"), lambda f: study_form(f, batch_size=10**12),
         "less than or equal to"),
    Case("study-patience-negative", "post", lambda f: reverse("study_new"), lambda f: study_form(f, patience=-3),
         "greater than or equal to"),
    Case("study-parallelism-huge", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, parallelism=10**9), "less than or equal to"),
    Case("study-executions-zero", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, executions_per_trial=0), "greater than or equal to"),
    Case("study-name-300", "post", lambda f: reverse("study_new"), lambda f: study_form(f, name="n" * 300),
         "at most 100 characters"),
    Case("study-name-newline", "post", lambda f: reverse("study_new"), lambda f: study_form(f, name="a\nb"),
         "cannot contain control characters"),
    Case("study-name-nul", "post", lambda f: reverse("study_new"), lambda f: study_form(f, name="a\x00b"),
         None, status=(400,), follow=False),
    Case("study-initial-random-huge", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, tuner="bayesian", initial_random_trials=HUGE), "less than or equal to"),
    Case("study-steps-per-execution-huge", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, steps_per_execution=HUGE), "whole number from 1 to"),
    Case("study-devices-huge", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, devices_per_trial=HUGE), "whole number from 1 to"),
    Case("study-dataset-superscript", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, dataset=SUPERSCRIPT_TWO), "Write numbers and ids with the digits 0-9"),
    Case("study-dataset-arabic-indic", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, dataset=f"{f.dataset.id}\u0663"), "with the digits 0-9"),  # int() reads it
    Case("study-dataset-huge", "post", lambda f: reverse("study_new"), lambda f: study_form(f, dataset=HUGE),
         "Select a valid choice."),
    Case("space-5000-digit-int", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space='[{"name": "units", "type": "int", "min": 1, "max": ' + "9" * 5000
                              + "}]"), "too large"),
    Case("space-5000-digit-text", "post", lambda f: reverse("study_new"),  # what the editor sends for it
         lambda f: study_form(f, search_space=space(_row("units", "int", min=1, max="9" * 5000))), "too large"),
    Case("space-10e400", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space=space(_row("units", "int", min=1, max=10**400))), "too large"),
    Case("space-float-1e400", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space='[{"name": "lr", "type": "float", "min": 0.001, "max": 1e400}]'),
         "too large"),
    Case("space-nan", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space='[{"name": "lr", "type": "float", "min": NaN, "max": 1}]'),
         "not a number"),
    Case("space-nested-100000", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space=nested(100_000)), "nested too deeply"),
    Case("space-grid-float-1e300", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, tuner="grid", search_space=space(
             _row("learning_rate", "float", min=0, max=1e300, step=1e-300, sampling="linear"))), "at most 1e+12"),
    Case("space-grid-float-step-1e-300", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, tuner="grid", search_space=space(
             _row("learning_rate", "float", min=0, max=1, step=1e-300, sampling="linear"))), "steps"),
    Case("space-log-step-tiny", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, tuner="grid", search_space=space(
             _row("learning_rate", "float", min=1e-6, max=1, step=1.0000001, sampling="log"))), "steps"),
    Case("space-int-1e12", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space=space(_row("units", "int", min=1, max=10**12, step=1,
                                                         sampling="linear"))), "at most 1,000,000,000"),
    Case("space-fixed-wrong-type", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space=space(_row("units", "fixed", value="lots"))), "whole number"),
    Case("space-not-a-list", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space='{"units": 3}'), "list"),
    Case("space-huge-text", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space="[" + " " * 300_000 + "]"), "too long"),
    Case("space-choice-10000-values", "post", lambda f: reverse("study_new"),
         lambda f: study_form(f, search_space=space(_row("units", "choice", values=list(range(10_000))))),
         "at most"),
    # --- datasets: upload and bundled --------------------------------------------------------
    Case("upload-seed-huge", "post", lambda f: reverse("dataset_upload"), lambda f: upload_form(seed=HUGE),
         "Split seed must be a whole number from 0 to 2,147,483,647"),
    Case("upload-seed-negative", "post", lambda f: reverse("dataset_upload"), lambda f: upload_form(seed=-5),
         "Split seed must be a whole number from 0 to 2,147,483,647"),
    Case("upload-filename-300", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(file=csv_file(name="x" * 296 + ".csv")), "file name"),
    Case("upload-name-300", "post", lambda f: reverse("dataset_upload"), lambda f: upload_form(name="d" * 300),
         "at most 100 characters"),
    Case("upload-name-newline", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(name="evil\nname"), "cannot contain control characters"),
    Case("upload-fraction-nan", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(val_fraction="nan"), "Enter a number."),
    Case("upload-fraction-huge", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(test_fraction="1e308"), "less than or equal to"),
    Case("upload-window-huge", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(kind="sequence", window=HUGE), "less than or equal to"),
    Case("upload-image-size-huge", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(image_size="99999x99999"), "from 4 to 1,024"),
    Case("upload-image-size-superscript", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(image_size="3" + SUPERSCRIPT_TWO), "height×width"),
    Case("upload-empty-file", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(file=SimpleUploadedFile("e.csv", b"", content_type="text/csv")), "empty"),
    Case("upload-binary-as-csv", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(file=SimpleUploadedFile("b.csv", bytes(range(256)) * 20, content_type="text/csv")),
         None),
    Case("upload-10000-classes", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(file=SimpleUploadedFile(
             "many.csv", ("a,label\n" + "\n".join(f"{i},c{i}" for i in range(10_000))).encode())),
         "distinct values"),
    Case("upload-npz-object-array", "post", lambda f: reverse("dataset_upload"),
         lambda f: upload_form(file=_npz_with_objects(), target_column=""), None),
    Case("bundled-seed-huge", "post", lambda f: reverse("dataset_list"), lambda f: bundled_form(seed=HUGE),
         "Split seed must be a whole number from 0 to 2,147,483,647"),
    Case("bundled-unknown", "post", lambda f: reverse("dataset_list"),
         lambda f: bundled_form(bundled_name="../../etc/passwd"), "Select a valid choice."),
    # --- ensembles ------------------------------------------------------------------------------
    Case("ensemble-seed-huge", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{f.model.id}", f"trial:{f.trial.id}"], "method": "mean", "seed": HUGE},
         "Seed must be a whole number from 0 to 2,147,483,647"),
    Case("ensemble-rounds-huge", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{f.model.id}", f"trial:{f.trial.id}"], "method": "greedy",
                    "greedy_rounds": HUGE}, "Greedy rounds must be a whole number from 1 to 1,000"),
    Case("ensemble-name-300", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{f.model.id}", f"trial:{f.trial.id}"], "method": "mean", "name": "e" * 300},
         "at most 80 characters"),
    Case("ensemble-member-superscript", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{SUPERSCRIPT_TWO}", f"trial:{f.trial.id}"], "method": "mean"}, None),
    Case("ensemble-member-huge", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{HUGE}", f"trial:{f.trial.id}"], "method": "mean"}, None),
    Case("ensemble-method-bogus", "post", lambda f: reverse("ensemble_new"),
         lambda f: {"members": [f"model:{f.model.id}", f"trial:{f.trial.id}"], "method": "bogus"},
         "Select a valid choice. bogus is not one of the available choices."),
    # --- model requests, budget, notes ----------------------------------------------------------
    Case("models-top-n-huge", "post", lambda f: reverse("study_models_request", args=[f.study.id]),
         lambda f: {"top_n": HUGE, "method": "retrain", "epoch_source": "detect", "epoch_cap": 10},
         "less than or equal to 20"),
    Case("models-epoch-cap-huge", "post", lambda f: reverse("study_models_request", args=[f.study.id]),
         lambda f: {"top_n": 1, "method": "retrain", "epoch_source": "detect", "epoch_cap": HUGE},
         "less than or equal to"),
    Case("models-name-newline", "post", lambda f: reverse("study_models_request", args=[f.study.id]),
         lambda f: {"top_n": 1, "method": "retrain", "epoch_source": "detect", "epoch_cap": 10, "name": "a\nb"},
         "Enter a valid"),
    Case("budget-huge", "post", lambda f: reverse("study_budget", args=[f.study.id]),
         lambda f: {"max_trials": HUGE, "parallelism": 1}, "less than or equal to"),
    Case("budget-completed-study", "post", lambda f: reverse("study_budget", args=[f.completed.id]),
         lambda f: {"max_trials": 50, "parallelism": 2}, "has completed, so its budget no longer changes anything"),
    Case("notes-nul", "post", lambda f: reverse("trial_annotate", args=[f.study.id, f.trial.id]),
         lambda f: {"notes": "hello\x00world", "tags": ""}, None, status=(400,), follow=False),
    Case("notes-huge", "post", lambda f: reverse("trial_annotate", args=[f.study.id, f.trial.id]),
         lambda f: {"notes": "n" * 200_000, "tags": ""}, "at most"),
    # --- teams ----------------------------------------------------------------------------------
    Case("switch-team-huge", "post", lambda f: reverse("switch_team"), lambda f: {"team": HUGE}, None,
         status=(404,), follow=False),
    Case("switch-team-superscript", "post", lambda f: reverse("switch_team"), lambda f: {"team": SUPERSCRIPT_TWO},
         None, status=(404,), follow=False),
    Case("member-add-name-300", "post", lambda f: reverse("team_member_add"),
         lambda f: {"who": "u" * 300, "role": "viewer"}, None),
    Case("member-add-role-bogus", "post", lambda f: reverse("team_member_add"),
         lambda f: {"who": "bob", "role": "emperor"}, None),
    Case("team-new-name-300", "post", lambda f: reverse("team_new"), lambda f: {"name": "t" * 300}, None),
    # --- query parameters -------------------------------------------------------------------------
    Case("leaderboard-study-huge", "get", lambda f: reverse("leaderboard") + f"?study={10**25}", None, None),
    Case("leaderboard-study-superscript", "get", lambda f: reverse("leaderboard") + f"?study={SUPERSCRIPT_TWO}",
         None, None),
    Case("leaderboard-dataset-huge", "get", lambda f: reverse("leaderboard") + f"?dataset={HUGE}", None, None),
    Case("leaderboard-page-huge", "get", lambda f: reverse("leaderboard") + f"?page={HUGE}", None, None),
    Case("leaderboard-date-bogus", "get", lambda f: reverse("leaderboard") + "?since=2024-13-45", None, None),
    Case("leaderboard-csv-newline-name", "get",
         lambda f: reverse("leaderboard") + f"?dataset={f.newline_dataset.id}&format=csv", None, None),
    Case("trials-csv-newline-name", "get", lambda f: reverse("study_trials_csv", args=[f.newline_study.id]),
         None, None),
    Case("compare-superscript", "get", lambda f: reverse("study_compare", args=[f.study.id])
         + f"?trials={SUPERSCRIPT_TWO}&trials={f.trial.id}", None, None),
    Case("compare-25-digits", "get", lambda f: reverse("study_compare", args=[f.study.id])
         + f"?trials={DIGITS_25}&trials={f.trial.id}", None, None),
    Case("studies-page-huge", "get", lambda f: reverse("study_list") + f"?page={HUGE}", None, None),
    Case("studies-page-negative", "get", lambda f: reverse("study_list") + "?page=-1", None, None),
    Case("studies-status-bogus", "get", lambda f: reverse("study_list") + "?status=<script>", None, None),
    Case("studies-dataset-superscript", "get", lambda f: reverse("study_list") + f"?dataset={SUPERSCRIPT_TWO}",
         None, None),
    Case("models-page-huge", "get", lambda f: reverse("model_list") + f"?page={HUGE}", None, None),
    Case("models-dataset-huge", "get", lambda f: reverse("model_list") + f"?dataset={HUGE}", None, None),
    Case("chart-data-after-huge", "get", lambda f: reverse("study_chart_data", args=[f.study.id])
         + f"?after={HUGE}", None, None),
    Case("study-live-after-superscript", "get", lambda f: reverse("study_live", args=[f.study.id])
         + f"?after={SUPERSCRIPT_TWO}", None, None),
    Case("dataset-page-huge", "get", lambda f: reverse("dataset_detail", args=[f.dataset.id]) + f"?page={HUGE}",
         None, None),
    Case("download-format-bogus", "get", lambda f: reverse("model_download", args=[f.model.id, "exe"]), None, None,
         status=(404,), follow=False),
    # --- the API ------------------------------------------------------------------------------------
    Case("api-nested-body", "post_json", lambda f: "/api/v1/studies/", lambda f: nested(100_000), None,
         status=(400,), follow=False),
    Case("api-seed-huge", "post_json", lambda f: "/api/v1/datasets/",
         lambda f: json.dumps({"bundled_name": "iris", "seed": 10**30}), None, status=(400,), follow=False),
    Case("api-trials-after-huge", "get", lambda f: f"/api/v1/studies/{f.study.id}/trials/?after={HUGE}", None,
         None, status=(400,), follow=False),
    Case("api-leaderboard-study-superscript", "get",
         lambda f: f"/api/v1/leaderboard/{f.dataset.id}/?study={SUPERSCRIPT_TWO}", None, None,
         status=(400, 404), follow=False),
]


def _npz_with_objects():
    buffer = io.BytesIO()
    np.savez(buffer, x=np.zeros((10, 3)), y=np.array([object()] * 10, dtype=object))
    return SimpleUploadedFile("objects.npz", buffer.getvalue(), content_type="application/octet-stream")


@dataclass
class Fixtures:
    dataset: Dataset
    study: Study
    trial: Trial
    model: TrainedModel
    completed: Study
    newline_dataset: Dataset
    newline_study: Study


@pytest.fixture
def f(acme, alice, acme_dataset, acme_study, acme_trial, acme_model):
    from experiments.services.artifacts import artifact_create
    from experiments.services.datasets import dataset_create_bundled
    from tests.integration.helpers import saved_study

    # A checkpoint, so the trial can be an ensemble member and the ensemble cases reach their field.
    acme_trial.checkpoint = artifact_create(team=acme, kind=Artifact.Kind.CHECKPOINT, filename="t.npz",
                                            fileobj=io.BytesIO(b"weights"))
    acme_trial.save(update_fields=["checkpoint"])
    completed = saved_study(acme, alice, acme_dataset, name="done study", hypermodel="dense")
    Study.objects.filter(pk=completed.pk).update(status=Study.Status.COMPLETED)
    completed.refresh_from_db()
    newline = dataset_create_bundled(team=acme, user=alice, bundled_name="iris", name="second iris")
    Dataset.objects.filter(pk=newline.pk).update(name='evil\r\nSet-Cookie: x=1; "name')
    newline.refresh_from_db()
    newline_study = saved_study(acme, alice, newline, name='study\r\nX-Evil: 1', hypermodel="dense")
    return Fixtures(acme_dataset, acme_study, acme_trial, acme_model, completed, newline, newline_study)


def _counts():
    files = sum(1 for p in (settings.VAR_DIR / "artifacts").rglob("*") if p.is_file()) \
        if (settings.VAR_DIR / "artifacts").exists() else 0
    return {m.__name__: m.objects.count() for m in (Dataset, Study, Trial, TrainedModel, Artifact)} | {"files": files}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_clearly_and_changes_nothing(alice_client, f, case):
    url = case.url(f)
    before = _counts()
    if case.method == "get":
        response = alice_client.get(url, follow=case.follow)
    elif case.method == "post_json":
        response = alice_client.post(url, data=case.data(f), content_type="application/json")
    else:
        response = alice_client.post(url, data=case.data(f), follow=case.follow)
    assert response.status_code != 500
    assert response.status_code in case.status, f"{response.status_code}: {page_text(response)[:500]}"
    if case.message is not None:
        assert case.message in page_text(response), page_text(response)[-3000:]
    assert _counts() == before
    for name, value in response.headers.items():
        assert "\n" not in value and "\r" not in value, f"header {name} carries a line break: {value!r}"


def test_a_refused_budget_change_leaves_the_completed_study_as_it_was(alice_client, f):
    before = (f.completed.max_trials, f.completed.parallelism)
    alice_client.post(reverse("study_budget", args=[f.completed.id]), {"max_trials": 50, "parallelism": 2})
    f.completed.refresh_from_db()
    assert (f.completed.max_trials, f.completed.parallelism) == before


def test_every_case_is_a_distinct_bad_input():
    assert len(CASES) >= 60 and len({case.id for case in CASES}) == len(CASES)
