"""The OpenAPI schema validates, and the API keeps to it: Schemathesis generates requests from
the schema (in process, through the WSGI application) and checks every answer."""

import io
import os
import re
import subprocess
import sys

import pytest
import schemathesis
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from experiments.models import Artifact, PredictionJob, TrainedModel
from experiments.services.artifacts import artifact_create
from experiments.services.recipes import recipe_create
from experiments.services.registry import registry_alias_set, registry_register
from tests.api.conftest import make_token
from tests.conftest import ROOT
from tests.web.registry_rows import signature
from webapp.wsgi import application

pytestmark = pytest.mark.django_db
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture
def keep_test_connection():
    """As Django's test client does: the WSGI handler would close the test's connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_the_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert "/api/v1/studies/{study_id}/trials/" in (tmp_path / "schema.yaml").read_text()


def test_the_docs_page_serves_swagger_ui_from_the_sidecar(alice_client):
    page = alice_client.get("/api/docs/").content.decode()
    # Every script, style and image from this server (the sidecar's static files), none from a CDN. A
    # plain "cdn" not in the page also failed on a random CSRF token that happened to hold those letters.
    assets = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", page)
    assert "swagger-ui" in page and any("drf_spectacular_sidecar" in url for url in assets), assets
    assert not [url for url in assets if re.match(r"(https?:)?//", url)], assets
    assert not re.search(r"(https?:)?//[\w.-]*(cdn|jsdelivr|unpkg)", page, re.IGNORECASE)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_generated_requests_get_no_500_and_answers_that_conform(method, keep_test_connection, alice, acme,
                                                                acme_dataset, acme_study, acme_trial, acme_model):
    token = make_token(alice, "schemathesis")
    headers = {"Authorization": f"Bearer {token}"}
    prediction = PredictionJob.objects.create(
        team=acme_model.team, model=acme_model, rows=1, inputs=artifact_create(
            team=acme_model.team, kind=Artifact.Kind.PREDICTION_INPUTS, filename="x.npz", fileobj=io.BytesIO(b"PK")))
    TrainedModel.objects.filter(pk=acme_model.pk).update(signature=signature())
    acme_model.refresh_from_db()
    registered = registry_register(team=acme, model=acme_model, name="acme", user=alice).registered_model
    move = registry_alias_set(registered=registered, alias="production", version=1, user=alice)
    ids = {"dataset_id": acme_dataset.id, "study_id": acme_study.id, "trial_pk": acme_trial.pk,
           "model_id": acme_model.id, "fmt": "keras", "ensemble_id": acme_model.id,
           "registered_model_id": registered.id, "alias": "production", "move_id": move.id,
           "prediction_id": prediction.id,
           "recipe_id": recipe_create(team=acme, user=alice, data={"name": "acme-recipe", "dataset": acme_dataset,
                                                                   "source_studies": [acme_study]}).id}
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application, headers=headers)
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        uploads = method == "POST" and operation.path.endswith("/datasets/")
        if operation.method.upper() != method or uploads:
            continue  # uploading datasets is covered by test_resources (files are slow to parse)
        fixed = {k: v for k, v in ids.items() if "{" + k + "}" in operation.path}
        strategy = operation.as_strategy(headers=headers, path_parameters=fixed)

        @settings(max_examples=15 if method == "POST" else 25, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def check(case):
            case.call_and_validate(checks=CHECKS)

        check()
        tried += 1
    assert tried >= (10 if method == "GET" else 5)


def test_the_api_keeps_to_its_schema_on_sqlite_too(tmp_path):
    """`make run` serves the API from SQLite: the same generated requests run there, in a pytest of
    their own on an SQLite test database (lookups PostgreSQL has and SQLite lacks were 500s)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTEST_ADDOPTS")}
    env.update(DATABASE_URL=f"sqlite:///{tmp_path / 'api.sqlite3'}", TUNEBOARD_VAR_DIR=str(tmp_path / "var"),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"{__file__}::test_generated_requests_get_no_500_and_answers_that_conform",
                           "tests/api/test_resources.py::test_studies_filter_by_a_trials_tag_on_sqlite_and_postgresql"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout
