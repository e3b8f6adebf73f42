"""The pages' side of tests/api/test_bad_bodies.py: every page that takes files (a dataset
upload, a batch prediction from the model page or from /predictions/new/, "Try it"), sent a body
Django cannot take (101 files, a multipart body without its boundary, 10 MB of fields, too many
fields) by any method, answers a page (or, to htmx, a fragment for the Try it box) that says what
was wrong: no Django 400 page, no logged traceback, nothing saved, nothing queued. A value over
the csv module's field limit is a message, not a 500; control characters and digits other than
0-9 are refused where a person typed them, with the message on the page."""

import logging

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.models import Dataset, ModelAlias, PredictionJob, Study, Trial
from experiments.services.registry import registry_register
from tests.fixtures.bad_bodies import BAD_MULTIPART, bad_multipart
from tests.web.pages import page_text, shows
from tests.web.registry_rows import signature

pytestmark = pytest.mark.django_db

ARABIC_INDIC_THREE = "\u0663"
IRIS_COLUMNS = "sepal length (cm),sepal width (cm),petal length (cm),petal width (cm)"
BEYOND_CSV_LIMIT = "1" * 140_000  # the csv module refuses a cell over 131,072 characters


def _iris_csv(name="rows.csv", cell="5.1"):
    return SimpleUploadedFile(name, f"{IRIS_COLUMNS}\n{cell},3.5,1.4,0.2\n".encode(), content_type="text/csv")


# Each page that takes files: (url, its fields but the file, the file field).
PAGES = {
    "dataset-upload": (lambda m: reverse("dataset_upload"),
                       {"name": "uploaded", "kind": "auto", "target_column": "label", "task": "auto"}, "file"),
    "prediction-new": (lambda m: reverse("prediction_new"), {"model": "MODEL"}, "file"),
    "model-predict": (lambda m: reverse("model_predict", args=[m.id]), {}, "file"),
    "model-try": (lambda m: reverse("model_try", args=[m.id]), {}, "images"),
}
def _state():
    return Dataset.objects.count(), PredictionJob.objects.count(), Study.objects.count()


def _no_traceback(caplog):
    return not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR
                or r.name.startswith("django.security")]


CASES = [pytest.param(page, payload, status, words, method, htmx, id=f"{page}-{payload}-{method}{'-htmx' * htmx}")
         for page in PAGES for payload, status, words in BAD_MULTIPART for method in ("post", "put", "patch")
         for htmx in ((False, True) if page == "model-try" else (False,))
         # A PUT or PATCH body is held in memory: 101 small files fit, 10 MB does not.
         if method == "post" or payload in ("10mb-fields", "101-files")]


@pytest.mark.parametrize(("page", "payload", "status", "words", "method", "htmx"), CASES)
def test_a_body_django_cannot_take_gets_a_page_that_says_why(alice_client, acme_model, caplog,
                                                             django_capture_on_commit_callbacks,
                                                             page, payload, status, words, method, htmx):
    url, fields, file_field = PAGES[page]
    fields = {k: str(acme_model.id) if v == "MODEL" else v for k, v in fields.items()}
    body, content_type = bad_multipart(payload, {**fields, file_field: _iris_csv()}, file_field)
    before = _state()
    caplog.set_level(logging.WARNING)

    with django_capture_on_commit_callbacks() as queued:
        response = getattr(alice_client, method)(url(acme_model), body, content_type=content_type,
                                                 **({"HTTP_HX_REQUEST": "true"} if htmx else {}))

    assert response.status_code == status, (response.status_code, page_text(response)[:300])
    text = page_text(response)
    assert 'id="request-refused"' in text and words.lower() in text.lower(), text[:500]
    assert ("<html" in text) is not htmx, "htmx gets a fragment for the box; a browser gets a page"
    assert _state() == before and queued == []
    assert _no_traceback(caplog)


def test_the_try_it_box_shows_a_value_over_the_csv_field_limit(alice_client, acme_model, caplog):
    caplog.set_level(logging.WARNING)
    url = reverse("model_try", args=[acme_model.id])

    response = alice_client.post(url, {"rows": f"{BEYOND_CSV_LIMIT},3.5,1.4,0.2"}, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and shows(response, "a value is longer than 131,072 characters")
    without_htmx = alice_client.post(url, {"rows": f"{IRIS_COLUMNS}\n{BEYOND_CSV_LIMIT},1,1,1"}, follow=True)
    assert shows(without_htmx, "a value is longer than 131,072 characters")
    assert not PredictionJob.objects.exists() and _no_traceback(caplog)


def test_an_uploaded_csv_with_a_value_over_the_field_limit_is_refused_with_a_message(alice_client, acme_model,
                                                                                     caplog):
    caplog.set_level(logging.WARNING)
    predicted = alice_client.post(reverse("model_predict", args=[acme_model.id]),
                                  {"file": _iris_csv(cell=BEYOND_CSV_LIMIT)}, follow=True)
    assert shows(predicted, "a value is longer than 131,072 characters")
    uploaded = alice_client.post(reverse("dataset_upload"), {
        "name": "long", "kind": "auto", "target_column": "label", "task": "auto", "val_fraction": 0.15,
        "test_fraction": 0.15, "seed": 0,
        "file": SimpleUploadedFile("long.csv", f"a,label\n{BEYOND_CSV_LIMIT},1\n".encode())})
    assert shows(uploaded, "a value is longer than 131,072 characters")
    assert not PredictionJob.objects.exists() and not Dataset.objects.filter(name="long").exists()
    assert _no_traceback(caplog)


def test_control_characters_typed_in_a_form_are_refused_under_the_field(alice_client, acme_dataset):
    response = alice_client.post(reverse("dataset_list"), {
        "bundled": "1", "bundled_name": "iris", "name": "iris \x1b[2J", "val_fraction": 0.15,
        "test_fraction": 0.15, "seed": 0})
    assert shows(response, "cannot contain control characters")
    study = alice_client.post(reverse("study_new"), {"name": "study", "dataset": acme_dataset.id,
                                                      "objective_metric": "val\x1bloss", "seed": "1\u0663"})
    form = study.context["form"]
    assert form.errors["seed"] == ["Write numbers and ids with the digits 0-9, not '\u0663'."]
    assert "an escape character (U+001B)" in form.errors["objective_metric"][0]
    assert all(shows(study, message) for messages in form.errors.values() for message in messages)
    assert Dataset.objects.count() == 1 and not Study.objects.exists()


def test_tags_and_notes_with_control_characters_are_refused_and_nothing_changes(alice_client, acme_study,
                                                                                acme_trial):
    tags = alice_client.post(reverse("study_tags", args=[acme_study.id]), {"tags": "good, bad\x1b[31m"},
                             follow=True)
    assert shows(tags, "Tags: This text holds an escape character (U+001B)")
    notes = alice_client.post(reverse("trial_annotate", args=[acme_study.id, acme_trial.pk]),
                              {"notes": "line one\nline \x9b2J", "tags": ""}, follow=True)
    assert shows(notes, "Notes: This text holds a control character (U+009B)")
    fine = alice_client.post(reverse("trial_annotate", args=[acme_study.id, acme_trial.pk]),
                             {"notes": "line one\r\n\tline two", "tags": "x"}, follow=True)
    assert shows(fine, "Notes and tags saved.")
    acme_study.refresh_from_db()
    assert acme_study.tags == [] and Trial.objects.get(pk=acme_trial.pk).notes == "line one\r\n\tline two"


def test_a_version_in_other_digits_is_refused_on_the_pages(alice_client, acme, alice, acme_model):
    acme_model.signature = signature()
    acme_model.save(update_fields=["signature"])
    registered = registry_register(team=acme, model=acme_model, name="iris", user=alice).registered_model
    alias = alice_client.post(reverse("registry_alias_set", args=[registered.id]),
                              {"alias": "production", "version": ARABIC_INDIC_THREE}, follow=True)
    assert shows(alias, f"Write numbers and ids with the digits 0-9, not '{ARABIC_INDIC_THREE}'.")
    assert not ModelAlias.objects.exists()
    predicted = alice_client.post(reverse("prediction_new"), {"reference": f"iris/{ARABIC_INDIC_THREE}",
                                                              "file": _iris_csv()})
    assert predicted.status_code == 400 and shows(predicted, "with the digits 0-9")
    assert not PredictionJob.objects.exists()
