"""Every API write route refuses a bad body the way the pages refuse a bad form: a 400 (or 413
for a body over its limit) with a JSON error that names the field, nothing saved, no 500 and
no traceback in the log. The cases are generated from each route's fields: wrong types (lists
and objects where text or a number belongs, true/false for a number), digits Python's isdigit
accepts but int() does not ('²'), numbers too large or negative, unknown fields, bodies that are
not objects, malformed JSON, 10 MB bodies and forms with too many fields."""

import io
import json
import logging
from dataclasses import dataclass, field

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from experiments.api.bodies import NoFields
from experiments.api.datasets import BundledDatasetInput, DatasetUploadInput
from experiments.api.ensembles import EnsembleInput
from experiments.api.predictions import PredictionInput
from experiments.api.studies import BudgetInput, CloneInput, StudyInput
from experiments.api.trained_models import ModelRequestInput
from experiments.models import (
    Artifact,
    AuditEvent,
    Dataset,
    ModelFile,
    PredictionJob,
    Study,
    TrainedModel,
    Trial,
    TrialRerun,
)
from experiments.services.artifacts import artifact_create
from experiments.services.studies import study_start
from tests.integration.helpers import TINY_SPACE
from tests.web.figures_rows import finished_model, finished_trial

pytestmark = pytest.mark.django_db

HUGE = 2**70
SUPERSCRIPT_TWO = "²"
TEN_MB = 10 * 1024 * 1024


@dataclass
class Route:
    name: str
    method: str
    url: callable  # objects -> path
    body: callable  # objects -> a valid body
    fields: type  # the input serializer: which fields the route takes, and their types
    started: bool = False  # the study must be running first (cancel, budget)
    multipart: bool = False
    extra: dict = field(default_factory=dict)


def _study_body(objects):
    return {"name": "api study", "dataset": objects["dataset"].id, "hypermodel": "dense", "search_space": TINY_SPACE,
            "tuner": "random", "objective_metric": "val_accuracy", "objective_direction": "auto", "max_trials": 5,
            "executions_per_trial": 1, "epochs": 4, "batch_size": 32, "patience": 2, "seed": 1, "queue": "cpu",
            "parallelism": 1}


def _csv():
    rows = b"a,b,label\n" + b"".join(b"%d,%d,%d\n" % (i, i * 2, i % 2) for i in range(40))
    return SimpleUploadedFile("rows.csv", rows, content_type="text/csv")


def _iris_rows():
    return SimpleUploadedFile("new.csv", b"sepal length (cm),sepal width (cm),petal length (cm),petal width (cm)\n"
                              b"5.1,3.5,1.4,0.2\n", content_type="text/csv")


ROUTES = [
    Route("datasets-bundled", "post", lambda o: reverse("api:dataset-list"),
          lambda o: {"bundled_name": "iris", "name": "iris again"}, BundledDatasetInput),
    Route("datasets-upload", "post", lambda o: reverse("api:dataset-list"),
          lambda o: {"name": "rows", "target_column": "label"}, DatasetUploadInput, multipart=True),
    Route("studies", "post", lambda o: reverse("api:study-list"), _study_body, StudyInput),
    Route("start", "post", lambda o: reverse("api:study-start", args=[o["study"].id]), lambda o: {}, NoFields),
    Route("resume", "post", lambda o: reverse("api:study-resume", args=[o["study"].id]), lambda o: {}, NoFields),
    Route("cancel", "post", lambda o: reverse("api:study-cancel", args=[o["study"].id]), lambda o: {}, NoFields,
          started=True),
    Route("budget", "patch", lambda o: reverse("api:study-budget", args=[o["study"].id]),
          lambda o: {"max_trials": 6}, BudgetInput, started=True),
    Route("clone", "post", lambda o: reverse("api:study-clone", args=[o["study"].id]), lambda o: {"name": "copy"},
          CloneInput),
    Route("models", "post", lambda o: reverse("api:study-models", args=[o["study"].id]), lambda o: {"top_n": 1},
          ModelRequestInput),
    Route("reruns", "post", lambda o: reverse("api:trial-reruns", args=[o["study"].id, o["trial"].pk]),
          lambda o: {}, NoFields),
    Route("ensembles", "post", lambda o: reverse("api:ensemble-create"),
          lambda o: {"members": [f"model:{o['model_a'].id}", f"model:{o['model_b'].id}"], "method": "mean"},
          EnsembleInput),
    Route("predictions", "post", lambda o: reverse("api:prediction-list"), lambda o: {"model": o["model_a"].id},
          PredictionInput, multipart=True, extra={"file": _iris_rows}),
]


def _bad_values(name: str, serializer_field) -> list:
    """Values the field must refuse whatever else the body holds."""
    from rest_framework import serializers as rf

    if isinstance(serializer_field, rf.FileField):
        return []
    if name == "search_space":
        return [5, "not json", {"units": 3}, [{"name": "units", "type": "int", "min": 9, "max": 1}], "[" * 5000]
    if isinstance(serializer_field, rf.BooleanField):
        return ["yes please", 5, [], {"a": 1}]
    if isinstance(serializer_field, rf.ListField):
        return ["model:1" if name == "members" else 5, [[]], [{"a": 1}], [True]]
    if isinstance(serializer_field, rf.IntegerField):
        return [["1"], {"a": 1}, True, SUPERSCRIPT_TWO, HUGE, -1, 1.5, "twelve"]
    if isinstance(serializer_field, rf.FloatField):
        # A stopping target may be any finite number: a metric may be negative or huge.
        return [["0.1"], {"a": 1}, True, "abc"] + ([] if name == "stop_target" else [1e300, -1.0])
    return [["a"], {"a": "b"}, True, 12]  # text and choices


def _cases():
    cases = []
    for route in ROUTES:
        for name, serializer_field in route.fields().fields.items():
            if route.multipart and isinstance(serializer_field, (list, dict)):
                continue
            for value in _bad_values(name, serializer_field):
                if route.multipart and not isinstance(value, str):
                    continue  # a form field is always text; the JSON routes check the types
                cases.append(pytest.param(route, {name: value}, name, 400, id=f"{route.name}-{name}-{value!r}"[:80]))
        cases.append(pytest.param(route, {"no_such_field": 1}, "no_such_field", 400, id=f"{route.name}-unknown"))
        if not route.multipart:
            cases += [pytest.param(route, ["a", "list"], None, 400, id=f"{route.name}-list-body"),
                      pytest.param(route, "just text", None, 400, id=f"{route.name}-text-body"),
                      pytest.param(route, b"{not json", None, 400, id=f"{route.name}-malformed"),
                      pytest.param(route, {"name": "x" * TEN_MB}, None, 413, id=f"{route.name}-10mb-json")]
        cases += [pytest.param(route, "FORM-10MB", None, 413, id=f"{route.name}-10mb-form"),
                  pytest.param(route, "FORM-MANY", None, 400, id=f"{route.name}-too-many-fields")]
    return cases


CASES = _cases()


@pytest.fixture
def objects(acme, alice, acme_dataset, acme_study):
    trial = finished_trial(acme_study, 1, epochs=1)
    model_a = finished_model(acme, alice, acme_study, trial, name="a")
    model_b = finished_model(acme, alice, acme_study, finished_trial(acme_study, 2, epochs=1), name="b")
    ModelFile.objects.create(model=model_a, format=ModelFile.Format.KERAS, artifact=artifact_create(
        team=acme, kind=Artifact.Kind.MODEL, filename="a.keras", fileobj=io.BytesIO(b"PK")))  # it can predict
    return {"dataset": acme_dataset, "study": acme_study, "trial": trial, "model_a": model_a, "model_b": model_b}


def _saved_state(study: Study) -> dict:
    study.refresh_from_db()
    return {"counts": [m.objects.count() for m in (Dataset, Study, Trial, TrainedModel, TrialRerun, AuditEvent,
                                                    PredictionJob)],
            "study": {f: getattr(study, f) for f in ("status", "max_trials", "parallelism", "name", "message")}}


def _send(client, route: Route, objects, payload):
    url = route.url(objects)
    send = getattr(client, route.method)
    if payload == "FORM-10MB":
        return send(url, "x=" + "y" * TEN_MB, content_type="application/x-www-form-urlencoded")
    if payload == "FORM-MANY":
        return send(url, "&".join(f"f{i}=1" for i in range(2000)), content_type="application/x-www-form-urlencoded")
    if isinstance(payload, bytes):
        return send(url, payload, content_type="application/json")
    if route.multipart:
        return send(url, {**route.body(objects), "file": route.extra.get("file", _csv)(), **payload},
                    format="multipart")
    body = {**route.body(objects), **payload} if isinstance(payload, dict) else payload
    return send(url, json.dumps(body), content_type="application/json")


def test_the_matrix_is_large_and_covers_every_write_route():
    assert len(CASES) >= 150
    covered = {case.values[0].name for case in CASES}
    assert covered == {route.name for route in ROUTES}


@pytest.mark.parametrize(("route", "payload", "field", "status"), CASES)
def test_a_bad_body_is_refused_with_a_json_error_naming_the_field_and_nothing_changes(
        alice_api, objects, caplog, route, payload, field, status):
    if route.started:
        study_start(study=objects["study"])
    before = _saved_state(objects["study"])
    caplog.set_level(logging.WARNING)

    response = _send(alice_api, route, objects, payload)

    assert response.status_code == status, (response.status_code, response.content[:500])
    error = response.json()
    assert set(error) == {"detail", "field", "errors"} and error["detail"]
    if field is not None:
        assert error["field"] == field and {k.split(".")[0] for k in error["errors"]} == {field}, error
    assert _saved_state(objects["study"]) == before, "nothing saved, nothing changed"
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "no traceback logged"


def test_each_route_accepts_its_valid_body(alice_api, objects):
    """The matrix's bodies are valid but for the one bad value: each route takes its base body."""
    for route in ROUTES:
        objects["study"].refresh_from_db()
        if route.started and objects["study"].status != Study.Status.RUNNING:
            study_start(study=objects["study"])
        response = _send(alice_api, route, objects, {})
        assert response.status_code in (200, 201, 202, 409), (route.name, response.json())
