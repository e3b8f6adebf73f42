"""Every API write route refuses a bad body the way the pages refuse a bad form: a 400 (or 413
for a body over its limit) with a JSON error that names the field or the problem, nothing saved,
nothing queued, no 500 and no traceback in the log. The cases are generated from each route's
fields: wrong types (lists and objects where text or a number belongs, true/false for a number),
digits Python's isdigit accepts but int() does not ('²') and digits int() reads but are not 0-9
('٣'), numbers too large or negative, control characters in text (NUL, a terminal's escape
sequence, C1), unknown fields, bodies that are not objects, malformed JSON, 10 MB bodies and forms
with too many fields; and, on every route and method (each takes multipart bodies), 101 files, a
multipart body without its boundary, 10 MB of multipart fields and too many multipart fields."""

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
from experiments.api.recipes import RecipeCloneInput, RecipeInput, RecipePatchInput, RunInput
from experiments.api.registry import AliasInput, RegisterInput, VersionInput
from experiments.api.studies import BudgetInput, CloneInput, StudyInput, StudyTagsInput
from experiments.api.trained_models import ModelRequestInput
from experiments.models import (
    AliasMove,
    Artifact,
    AuditEvent,
    Dataset,
    EnsembleRecipe,
    ModelAlias,
    ModelFile,
    ModelVersion,
    PredictionJob,
    RecipeRun,
    RegisteredModel,
    Study,
    TrainedModel,
    Trial,
    TrialRerun,
)
from experiments.services.artifacts import artifact_create
from experiments.services.recipes import recipe_create
from experiments.services.registry import registry_register
from experiments.services.studies import study_start
from tests.fixtures.bad_bodies import BAD_MULTIPART, TEN_MB, bad_multipart
from tests.integration.helpers import TINY_SPACE
from tests.web.figures_rows import finished_model, finished_trial
from tests.web.recipe_rows import recipe_data
from tests.web.registry_rows import signature

pytestmark = pytest.mark.django_db

HUGE = 2**70
SUPERSCRIPT_TWO = "²"
ARABIC_INDIC_THREE = "\u0663"  # int() reads it as 3
# Text no field takes: a NUL (PostgreSQL's text cannot hold one), a terminal's colour escape, and
# the one-byte (C1) form of the same terminal control.
CONTROL_TEXT = ["a\x00b", "red \x1b[31m", "csi \x9b2J"]


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
    types: bool = True  # every wrong type for every field (False: text and digits only, types tested elsewhere)


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
    Route("study-tags", "patch", lambda o: reverse("api:study-detail", args=[o["study"].id]),
          lambda o: {"tags": ["ensemble"]}, StudyTagsInput),
    Route("recipes", "post", lambda o: reverse("api:recipe-list"),
          lambda o: _recipe_body(o, name="another"), RecipeInput, types=False),
    Route("recipe-put", "put", lambda o: reverse("api:recipe-detail", args=[o["recipe"].id]),
          lambda o: _recipe_body(o), RecipeInput, types=False),
    Route("recipe-patch", "patch", lambda o: reverse("api:recipe-detail", args=[o["recipe"].id]),
          lambda o: {"top_k": 4}, RecipePatchInput, types=False),
    Route("recipe-clone", "post", lambda o: reverse("api:recipe-clone", args=[o["recipe"].id]),
          lambda o: {"name": "copy"}, RecipeCloneInput),
    Route("recipe-runs", "post", lambda o: reverse("api:recipe-runs", args=[o["recipe"].id]),
          lambda o: {"reason": "nightly"}, RunInput),
    Route("registry", "post", lambda o: reverse("api:registry-list"),
          lambda o: {"name": "iris-b", "model": o["model_b"].id}, RegisterInput),
    Route("registry-versions", "post", lambda o: reverse("api:registry-versions", args=[o["registered"].id]),
          lambda o: {"model": o["model_b"].id}, VersionInput),
    Route("registry-alias", "put",
          lambda o: reverse("api:registry-alias", args=[o["registered"].id, "production"]),
          lambda o: {"version": 1}, AliasInput),
]


def _recipe_body(objects, **changes) -> dict:
    changes.setdefault("per_group_max", 2)
    body = {k: v for k, v in recipe_data(objects["dataset"], objects["study"], **changes).items() if v != ""}
    return {**body, "correlation_cap": None}


def _bad_values(name: str, serializer_field, types: bool = True) -> list:
    """Values the field must refuse whatever else the body holds."""
    from rest_framework import serializers as rf

    if isinstance(serializer_field, rf.FileField):
        return []
    if name == "search_space":
        return [5, "not json", {"units": 3}, [{"name": "units", "type": "int", "min": 9, "max": 1}], "[" * 5000,
                [{**TINY_SPACE[0], "name": "units\x1b[2J"}]]
    if isinstance(serializer_field, rf.BooleanField):
        return ["yes please", 5, [], {"a": 1}] if types else []
    if isinstance(serializer_field, rf.ListField):
        if isinstance(serializer_field.child, rf.CharField):
            return ([5, [[]], [{"a": 1}]] if types else []) + [["ok", text] for text in CONTROL_TEXT]
        if name == "members":
            return ["model:1", [[]], [{"a": 1}], [True], [f"model:{ARABIC_INDIC_THREE}"], ["model:1\x1b"]]
        return ([5, [[]], [{"a": 1}], [True]] if types else []) + [[ARABIC_INDIC_THREE]]
    if isinstance(serializer_field, rf.IntegerField):
        return ([["1"], {"a": 1}, True, SUPERSCRIPT_TWO, HUGE, -1, 1.5, "twelve"] if types else []) + [
            ARABIC_INDIC_THREE, f"1{ARABIC_INDIC_THREE}"]
    if isinstance(serializer_field, rf.FloatField):
        # A stopping target may be any finite number: a metric may be negative or huge.
        return ([["0.1"], {"a": 1}, True, "abc"] + ([] if name == "stop_target" else [1e300, -1.0])
                if types else []) + [f"0.{ARABIC_INDIC_THREE}"]
    return ([["a"], {"a": "b"}, True, 12] if types else []) + CONTROL_TEXT  # text and choices


# Bodies refused as a whole (field None), each with a word of its message: (payload, status, word).
WHOLE_BODIES = [("FORM-10MB", 413, "MB"), ("FORM-MANY", 400, "too many fields"),
                *((f"MULTIPART-{kind}", status, word) for kind, status, word in BAD_MULTIPART)]


def _cases():
    cases = []
    for route in ROUTES:
        for name, serializer_field in route.fields().fields.items():
            if route.multipart and isinstance(serializer_field, (list, dict)):
                continue
            for value in _bad_values(name, serializer_field, route.types):
                if route.multipart and not isinstance(value, str):
                    continue  # a form field is always text; the JSON routes check the types
                cases.append(pytest.param(route, {name: value}, name, 400, id=f"{route.name}-{name}-{value!r}"[:80]))
        cases.append(pytest.param(route, {"no_such_field": 1}, "no_such_field", 400, id=f"{route.name}-unknown"))
        if not route.multipart:
            cases += [pytest.param(route, ["a", "list"], None, 400, id=f"{route.name}-list-body"),
                      pytest.param(route, "just text", None, 400, id=f"{route.name}-text-body"),
                      pytest.param(route, b"{not json", None, 400, id=f"{route.name}-malformed"),
                      pytest.param(route, {"name": "x" * TEN_MB}, None, 413, id=f"{route.name}-10mb-json")]
        cases += [pytest.param(route, payload, None, status, id=f"{route.name}-{payload.lower()}")
                  for payload, status, _ in WHOLE_BODIES]
    return cases


CASES = _cases()


@pytest.fixture
def objects(acme, alice, acme_dataset, acme_study):
    trial = finished_trial(acme_study, 1, epochs=1)
    model_a = finished_model(acme, alice, acme_study, trial, name="a", signature=signature())
    model_b = finished_model(acme, alice, acme_study, finished_trial(acme_study, 2, epochs=1), name="b",
                             signature=signature())
    ModelFile.objects.create(model=model_a, format=ModelFile.Format.KERAS, artifact=artifact_create(
        team=acme, kind=Artifact.Kind.MODEL, filename="a.keras", fileobj=io.BytesIO(b"PK")))  # it can predict
    recipe = recipe_create(team=acme, user=alice, data={"name": "diverse", "dataset": acme_dataset,
                                                        "source_studies": [acme_study], "per_group_max": 2})
    registered = registry_register(team=acme, model=model_a, name="iris", user=alice).registered_model
    return {"dataset": acme_dataset, "study": acme_study, "trial": trial, "model_a": model_a, "model_b": model_b,
            "recipe": recipe, "registered": registered}


def _saved_state(study: Study) -> dict:
    study.refresh_from_db()
    return {"counts": [m.objects.count() for m in (Dataset, Study, Trial, TrainedModel, TrialRerun, AuditEvent,
                                                    PredictionJob, RecipeRun, RegisteredModel, ModelVersion,
                                                    AliasMove)],
            "study": {f: getattr(study, f) for f in ("status", "max_trials", "parallelism", "name", "message",
                                                     "tags")},
            "recipes": list(EnsembleRecipe.objects.order_by("pk").values()),
            "aliases": list(ModelAlias.objects.values_list("name", "version_id"))}


def _send(client, route: Route, objects, payload):
    url = route.url(objects)
    send = getattr(client, route.method)
    if payload == "FORM-10MB":
        return send(url, "x=" + "y" * TEN_MB, content_type="application/x-www-form-urlencoded")
    if payload == "FORM-MANY":
        return send(url, "&".join(f"f{i}=1" for i in range(2000)), content_type="application/x-www-form-urlencoded")
    if isinstance(payload, str) and payload.startswith("MULTIPART-"):
        fields = {k: str(v) for k, v in route.body(objects).items() if not isinstance(v, list | dict)}
        body, content_type = bad_multipart(payload.removeprefix("MULTIPART-"), fields)
        return send(url, body, content_type=content_type)
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
        alice_api, objects, caplog, django_capture_on_commit_callbacks, route, payload, field, status):
    if route.started:
        study_start(study=objects["study"])
    before = _saved_state(objects["study"])
    caplog.set_level(logging.WARNING)

    with django_capture_on_commit_callbacks() as queued:  # every task is sent on commit
        response = _send(alice_api, route, objects, payload)

    assert response.status_code == status, (response.status_code, response.content[:500])
    error = response.json()
    assert set(error) == {"detail", "field", "errors"} and error["detail"]
    if field is not None:
        assert error["field"] == field and {k.split(".")[0] for k in error["errors"]} == {field}, error
    word = next((word for body, _, word in WHOLE_BODIES if body == payload), None)
    assert word is None or word.lower() in error["detail"].lower(), error
    assert _saved_state(objects["study"]) == before, "nothing saved, nothing changed"
    assert queued == [], "nothing queued"
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR
                or r.name.startswith("django.security")], "no traceback logged"


def test_each_route_accepts_its_valid_body(alice_api, objects, django_capture_on_commit_callbacks):
    """The matrix's bodies are valid but for the one bad value: each route takes its base body
    (and the capture that shows nothing queued above sees what a valid body queues)."""
    for route in ROUTES:
        objects["study"].refresh_from_db()
        if route.started and objects["study"].status != Study.Status.RUNNING:
            study_start(study=objects["study"])
        with django_capture_on_commit_callbacks() as queued:
            response = _send(alice_api, route, objects, {})
        assert response.status_code in (200, 201, 202, 409), (route.name, response.json())
        if route.name in ("start", "predictions"):
            assert queued, f"{route.name} queues its work on commit"


@pytest.mark.parametrize("text", [*CONTROL_TEXT, "invoice\u202eexe.txt"])  # a right-to-left override too
def test_a_recipe_runs_reason_with_control_characters_is_refused_and_no_run_starts(alice_api, objects, text):
    url = reverse("api:recipe-runs", args=[objects["recipe"].id])
    response = alice_api.post(url, {"reason": f"nightly {text}"}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "reason", response.json()
    assert "control" in response.json()["detail"] or "character (U+" in response.json()["detail"]
    assert not RecipeRun.objects.exists()


def test_a_registry_version_in_other_digits_names_no_version(alice_api, objects):
    response = alice_api.post(reverse("api:prediction-list"), {"reference": f"iris/{ARABIC_INDIC_THREE}",
                                                               "file": _iris_rows()}, format="multipart")
    assert response.status_code == 400 and response.json()["field"] == "reference", response.json()
    assert "digits 0-9" in response.json()["detail"] and not PredictionJob.objects.exists()
    assert alice_api.post(reverse("api:prediction-list"), {"reference": "iris/1", "file": _iris_rows()},
                          format="multipart").status_code == 202


@pytest.mark.parametrize("path", [f"/api/v1/studies/{ARABIC_INDIC_THREE}/", f"/api/v1/models/{ARABIC_INDIC_THREE}/",
                                  f"/api/v1/registry/1{ARABIC_INDIC_THREE}/versions/"])
def test_an_id_in_other_digits_is_a_json_404_naming_the_digit(alice_api, objects, caplog, path):
    caplog.set_level(logging.WARNING)
    response = alice_api.get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert "digits 0-9" in response.json()["detail"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
