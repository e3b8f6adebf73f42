"""Batch predictions through the pages and the API (no worker: what the web process does). Bad
inputs are refused with the same message on both and store or queue nothing; good ones store the
parsed inputs and queue a job; a registry alias resolves when asked; viewers see but cannot ask;
other teams get 404 on every route."""

import io
import re
import zipfile

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from experiments.datasets.arrays import strings_from_arrays
from experiments.models import (
    Artifact,
    ModelAlias,
    ModelFile,
    ModelVersion,
    PredictionJob,
    RegisteredModel,
    TrainedModel,
)
from experiments.selectors.artifacts import artifact_read_bytes
from experiments.services.artifacts import artifact_create
from experiments.services.datasets import dataset_create_bundled
from tests.api.conftest import make_token
from tests.web.pages import page_text, shows

pytestmark = pytest.mark.django_db

IRIS_COLUMNS = "sepal length (cm),sepal width (cm),petal length (cm),petal width (cm)"


def _api(user):
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(user, 'predictions')}")
    return api


def _counts():
    return PredictionJob.objects.count(), Artifact.objects.count()


def _png(size) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(np.zeros(size, np.uint8), mode="L").save(buffer, format="PNG")
    return buffer.getvalue()


def _zip(size, n=2) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(n):
            archive.writestr(f"inputs/{i}.png", _png(size))
    return buffer.getvalue()


@pytest.fixture
def image_model(acme, alice, acme_study, acme_trial):
    """A completed model of the bundled 8×8 digit images (its lineage borrowed: predicting reads
    only the model's dataset and file)."""
    dataset = dataset_create_bundled(team=acme, user=alice, bundled_name="digits_images")
    model = TrainedModel.objects.create(team=acme, dataset=dataset, study=acme_study, trial=acme_trial,
                                        name="digit-images", version=1,
                                        method=TrainedModel.Method.PROMOTE, seed=0,
                                        status=TrainedModel.Status.COMPLETED, finished=timezone.now())
    artifact = artifact_create(team=acme, kind=Artifact.Kind.MODEL, filename="m.keras", fileobj=io.BytesIO(b"PK"))
    ModelFile.objects.create(model=model, format=ModelFile.Format.KERAS, artifact=artifact)
    return model


BAD_TABLES = {
    "wrong columns": (f"{IRIS_COLUMNS},colour\n1,2,3,4,red\n".encode(), "not used by the model: 'colour'"),
    "missing column": (b"sepal length (cm),petal width (cm)\n1,2\n", "missing 'sepal width (cm)'"),
    "empty": (b"", "The submitted file is empty."),
    "header only": (f"{IRIS_COLUMNS}\n".encode(), "The file has a header row but no data rows."),
    "not a number": (f"{IRIS_COLUMNS}\n1,2,x,4\n".encode(), "must contain numbers, but row 2 has 'x'"),
    "not csv": (b"\x00\x01binary", "This looks like a binary file, not CSV text."),
}


@pytest.mark.parametrize("case", sorted(BAD_TABLES))
def test_bad_inputs_are_refused_with_the_same_message_on_the_page_and_the_api_and_nothing_is_stored(
        alice_client, alice, acme_model, case):
    data, message = BAD_TABLES[case]
    before = _counts()
    response = alice_client.post(reverse("model_predict", args=[acme_model.id]),
                                 {"file": SimpleUploadedFile("inputs.csv", data)}, follow=True)
    assert shows(response, message)
    answer = _api(alice).post("/api/v1/predictions/", {"model": acme_model.id,
                                                      "file": SimpleUploadedFile("inputs.csv", data)},
                              format="multipart")
    assert answer.status_code == 400
    assert message in answer.json()["detail"]
    assert _counts() == before


def test_a_file_over_the_upload_limit_is_refused_before_it_is_read(alice_client, alice, acme_model, settings):
    settings.UPLOAD_MAX_MB = 1
    data = (IRIS_COLUMNS + "\n" + "1,2,3,4\n" * 150_000).encode()
    before = _counts()
    response = alice_client.post(reverse("model_predict", args=[acme_model.id]),
                                 {"file": SimpleUploadedFile("inputs.csv", data)}, follow=True)
    assert shows(response, "the limit is 1 MB")
    answer = _api(alice).post("/api/v1/predictions/", {"model": acme_model.id,
                                                      "file": SimpleUploadedFile("inputs.csv", data)},
                              format="multipart")
    assert "the limit is 1 MB" in answer.json()["detail"]
    assert _counts() == before


@pytest.mark.parametrize("filename, data, message", [
    ("big.zip", _zip((10, 12)), "is 10×12 pixels (height × width); the model takes 8×8 images"),
    ("rgb.npz", None, "expected 8×8×1, got 8×8×3"),
    ("rows.csv", b"a,b\n1,2\n", "This model takes image inputs"),
])
def test_images_of_another_size_or_kind_are_refused_saying_what_was_expected(alice_client, alice, image_model,
                                                                             filename, data, message):
    if data is None:
        buffer = io.BytesIO()
        np.savez(buffer, x=np.zeros((2, 8, 8, 3), np.uint8))
        data = buffer.getvalue()
    before = _counts()
    response = alice_client.post(reverse("model_predict", args=[image_model.id]),
                                 {"file": SimpleUploadedFile(filename, data)}, follow=True)
    assert shows(response, message)
    answer = _api(alice).post("/api/v1/predictions/", {"model": image_model.id,
                                                      "file": SimpleUploadedFile(filename, data)}, format="multipart")
    assert message in answer.json()["detail"]
    assert _counts() == before


def test_an_upload_stores_the_parsed_inputs_and_queues_a_job_shown_on_its_page(alice_client, acme_model):
    data = f"petal width (cm),{IRIS_COLUMNS.rsplit(',', 1)[0]}\n0.2,5.1,3.5,1.4\n1.8,6.3,2.9,5.6\n0.3,4.8,3,1.4\n"
    response = alice_client.post(reverse("model_predict", args=[acme_model.id]),
                                 {"file": SimpleUploadedFile("new.csv", data.encode())})
    job = PredictionJob.objects.get()
    assert response.url == reverse("prediction_detail", args=[job.pk])
    assert (job.status, job.rows, job.rows_done, job.input_filename, job.model_id) == (
        "queued", 3, 0, "new.csv", acme_model.id)
    assert job.last_sent is not None
    with np.load(io.BytesIO(artifact_read_bytes(artifact=job.inputs))) as npz:
        # In the model's feature order, whatever the file's column order.
        np.testing.assert_allclose(npz["x"][0], [5.1, 3.5, 1.4, 0.2], rtol=1e-6)
    page = page_text(alice_client.get(response.url))
    assert "0 / 3 rows" in page and "waiting for a worker" in page and "its place in the CPU queue" in page
    assert "Recent predictions" in page_text(alice_client.get(reverse("model_detail", args=[acme_model.id])))


def test_try_it_takes_typed_rows_and_answers_with_the_live_part(alice_client, acme_model):
    response = alice_client.post(reverse("model_try", args=[acme_model.id]),
                                 {"rows": "5.1,3.5,1.4,0.2\n6.3,2.9,5.6,1.8"}, HTTP_HX_REQUEST="true")
    job = PredictionJob.objects.get()
    assert job.is_try and job.rows == 2
    assert f'hx-get="{reverse("prediction_live", args=[job.pk])}"' in response.content.decode()
    refused = alice_client.post(reverse("model_try", args=[acme_model.id]), {"rows": "1,2\n"}, HTTP_HX_REQUEST="true")
    assert 'id="try-error"' in page_text(refused)
    assert "Row 2 has 2 values, but the header has 4 columns." in page_text(refused)
    assert PredictionJob.objects.count() == 1


def test_try_it_takes_dropped_images(alice_client, image_model):
    images = [SimpleUploadedFile(f"{i}.png", _png((8, 8))) for i in range(3)]
    alice_client.post(reverse("model_try", args=[image_model.id]), {"images": images}, HTTP_HX_REQUEST="true")
    job = PredictionJob.objects.get()
    with np.load(io.BytesIO(artifact_read_bytes(artifact=job.inputs))) as npz:
        assert npz["x"].shape == (3, 8, 8, 1) and npz["x"].dtype == np.uint8
        names = strings_from_arrays(npz["names_utf8"], npz["names_ends"])
        assert names == ["001-0.png", "002-1.png", "003-2.png"]


def _alias(acme, model) -> ModelVersion:
    registered = RegisteredModel.objects.create(team=acme, name="iris", task="classification",
                                                dataset_kind="tabular")
    version = ModelVersion.objects.create(registered_model=registered, version=1, trained_model=model)
    ModelAlias.objects.create(registered_model=registered, name="production", version=version)
    return version


def test_a_registry_alias_is_resolved_when_asked_on_the_page_and_in_the_api(alice_client, alice, acme, acme_model):
    version = _alias(acme, acme_model)
    data = f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode()
    response = alice_client.post(reverse("prediction_new"), {"reference": "iris@production",
                                                             "file": SimpleUploadedFile("a.csv", data)})
    job = PredictionJob.objects.get()
    assert response.url == reverse("prediction_detail", args=[job.pk])
    assert (job.model_id, job.requested_as, job.registry_version_id) == (acme_model.id, "iris@production", version.pk)
    assert "iris@production" in page_text(alice_client.get(response.url))
    answer = _api(alice).post("/api/v1/predictions/", {"reference": "iris@production",
                                                      "file": SimpleUploadedFile("a.csv", data)}, format="multipart")
    assert answer.status_code == 202 and answer.json()["registry_version"] == 1
    for reference, message in [("iris@staging", "has no alias 'staging'"), ("iris", "is not a registry reference")]:
        page = alice_client.post(reverse("prediction_new"), {"reference": reference,
                                                             "file": SimpleUploadedFile("a.csv", data)})
        assert page.status_code == 400 and shows(page, message)
        assert message in _api(alice).post("/api/v1/predictions/", {"reference": reference,
                                                                   "file": SimpleUploadedFile("a.csv", data)},
                                           format="multipart").json()["detail"]
    assert PredictionJob.objects.count() == 2


def test_the_new_prediction_page_says_each_refusal_once_and_what_is_missing(alice_client, alice, acme, acme_model):
    _alias(acme, acme_model)
    data = f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode()

    def post(**fields):
        page = alice_client.post(reverse("prediction_new"), {**fields, "file": SimpleUploadedFile("a.csv", data)})
        assert page.status_code == 400
        return page.content.decode()

    assert "Give a model or a registry reference (name@alias)." in post()
    assert "Give a model or a registry reference (name@alias), not both." in post(
        model=str(acme_model.id), reference="iris@production")
    assert post(reference="iris@staging").count("has no alias &#x27;staging&#x27;") == 1  # under its field only
    assert PredictionJob.objects.count() == 0


def test_a_model_that_has_not_finished_cannot_predict(alice_client, alice, acme_model):
    TrainedModel.objects.filter(pk=acme_model.pk).update(status=TrainedModel.Status.RUNNING)
    data = f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode()
    answer = _api(alice).post("/api/v1/predictions/", {"model": acme_model.id,
                                                      "file": SimpleUploadedFile("a.csv", data)}, format="multipart")
    assert answer.status_code == 400 and "has not finished training" in answer.json()["detail"]
    assert not PredictionJob.objects.exists()


def _job(acme_model, alice_client) -> PredictionJob:
    alice_client.post(reverse("model_predict", args=[acme_model.id]),
                      {"file": SimpleUploadedFile("a.csv", f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode())})
    return PredictionJob.objects.get()


def test_cancel_and_downloads_on_the_page_and_the_api(alice_client, alice, acme, acme_model):
    job = _job(acme_model, alice_client)
    assert alice_client.get(reverse("prediction_download", args=[job.pk, "csv"])).status_code == 404
    assert _api(alice).get(f"/api/v1/predictions/{job.pk}/").json()["downloads"] == {}
    alice_client.post(reverse("prediction_cancel", args=[job.pk]))
    job.refresh_from_db()
    assert job.status == "cancelled"
    assert _api(alice).post(f"/api/v1/predictions/{job.pk}/cancel/").status_code == 409
    csv_file = artifact_create(team=acme, kind=Artifact.Kind.BATCH_PREDICTIONS, filename="p.csv",
                               fileobj=io.BytesIO(b"row,label\n1,setosa\n"))
    PredictionJob.objects.filter(pk=job.pk).update(predictions_csv=csv_file)
    body = b"".join(alice_client.get(reverse("prediction_download", args=[job.pk, "csv"])).streaming_content)
    assert body == b"row,label\n1,setosa\n"
    api_body = _api(alice).get(f"/api/v1/predictions/{job.pk}/download/csv/")
    assert b"".join(api_body.streaming_content) == body
    assert list(_api(alice).get(f"/api/v1/predictions/{job.pk}/").json()["downloads"]) == ["csv"]


def test_viewers_see_predictions_but_cannot_ask_or_cancel(alice_client, acme_model, bob):
    job = _job(acme_model, alice_client)
    bob_client = alice_client  # the one test client, now bob's
    bob_client.force_login(bob)
    assert bob_client.get(reverse("prediction_detail", args=[job.pk])).status_code == 200
    data = f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode()
    for name, args in [("model_predict", [acme_model.id]), ("model_try", [acme_model.id]), ("prediction_new", [])]:
        response = bob_client.post(reverse(name, args=args), {"model": acme_model.id,
                                                              "file": SimpleUploadedFile("a.csv", data)})
        assert response.status_code == 403, name
    assert bob_client.post(reverse("prediction_cancel", args=[job.pk])).status_code == 403
    assert _api(bob).post("/api/v1/predictions/", {"model": acme_model.id, "file": SimpleUploadedFile(
        "a.csv", data)}, format="multipart").status_code == 403
    assert PredictionJob.objects.count() == 1 and PredictionJob.objects.get().status == "queued"


def test_another_team_gets_404_on_every_prediction_route_and_nothing_changes(alice_client, charlie, acme_model):
    job = _job(acme_model, alice_client)
    alice_client.logout()
    alice_client.force_login(charlie)
    data = f"{IRIS_COLUMNS}\n5.1,3.5,1.4,0.2\n".encode()
    before = _counts()
    pages = [("get", reverse("prediction_detail", args=[job.pk])), ("get", reverse("prediction_live", args=[job.pk])),
             ("get", reverse("prediction_download", args=[job.pk, "csv"])),
             ("post", reverse("prediction_cancel", args=[job.pk])),
             ("post", reverse("model_predict", args=[acme_model.id])),
             ("post", reverse("model_try", args=[acme_model.id]))]
    for method, url in pages:
        response = getattr(alice_client, method)(url, {"file": SimpleUploadedFile("a.csv", data)} if method == "post"
                                                 else None)
        assert response.status_code == 404, url
    # Another team's model id is "no such model" in the form, as any unknown id.
    response = alice_client.post(reverse("prediction_new"), {"model": acme_model.id,
                                                             "file": SimpleUploadedFile("a.csv", data)})
    assert shows(response, f"There is no model {acme_model.id} in this team.")
    api = _api(charlie)
    for method, url in [("get", f"/api/v1/predictions/{job.pk}/"), ("post", f"/api/v1/predictions/{job.pk}/cancel/"),
                        ("get", f"/api/v1/predictions/{job.pk}/download/csv/")]:
        assert getattr(api, method)(url).status_code == 404, url
    answer = api.post("/api/v1/predictions/", {"model": acme_model.id, "file": SimpleUploadedFile("a.csv", data)},
                      format="multipart")
    assert answer.status_code == 400 and "There is no model" in answer.json()["detail"]
    assert _counts() == before
    job.refresh_from_db()
    assert job.status == "queued"


def test_try_it_rows_fit_features_whose_names_need_quoting():
    from experiments.datasets.inputs import ModelInputSpec
    from experiments.datasets.tabular_reader import parse_csv_inputs
    from experiments.forms.predictions import _typed_csv

    spec = ModelInputSpec(kind="tabular", input_shape=[2], feature_names=["width, cm", 'say "hi"'])
    for typed in ("1.5,2\n3,4", '"width, cm","say ""hi"""\n1.5,2\n3,4'):
        x = parse_csv_inputs(io.BytesIO(_typed_csv(typed, spec)), features=spec.feature_names)
        np.testing.assert_array_equal(x, np.array([[1.5, 2], [3, 4]], np.float32))


def test_the_preview_shows_probabilities_as_fixed_decimals_and_the_full_number_on_hover(alice_client, acme_model):
    job = _job(acme_model, alice_client)
    preview = [{"row": "1", "label": "setosa", "setosa": "0.9999854", "versicolor": "1.4580002e-05",
                "virginica": "0.12345678"}]
    PredictionJob.objects.filter(pk=job.pk).update(status="completed", rows_done=1, preview=preview)
    page = page_text(alice_client.get(reverse("prediction_detail", args=[job.pk])))
    table = page.split('id="prediction-preview"', 1)[1].split("</table>", 1)[0]
    # The CSV's column order, though PostgreSQL hands the stored row back with its keys by length.
    assert re.findall(r'<th scope="col">([^<]*)</th>', table) == ["row", "label", "setosa", "versicolor", "virginica"]
    assert "<td>1</td><td>setosa</td>" in table  # the row's number and label as they are
    assert '<td class="number" title="1.4580002e-05">&lt;0.0001</td>' in table
    assert '<td class="number" title="0.9999854">&gt;0.9999</td>' in table
    assert '<td class="number" title="0.12345678">0.1235</td>' in table
    assert "e-05<" not in table
