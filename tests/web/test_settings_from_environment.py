"""Settings come from the environment: a bad value fails at start-up with
ImproperlyConfigured naming the variable, and the defaults run embedded (SQLite, the
filesystem broker and filesystem artifacts) while PostgreSQL keeps artifacts in the database."""

from pathlib import Path

import pytest

from experiments.tuning.hypermodel_catalog import BUILTIN
from tests.web.fresh_process import run_in_fresh_process

# Loads the settings (and the hypermodel catalog, which reads them) in a fresh interpreter.
SCRIPT = r"""
import json
from django.core.exceptions import ImproperlyConfigured

try:
    from django.conf import settings
    from experiments.tuning.hypermodel_catalog import hypermodel_entries

    result = {
        "engine": settings.DATABASES["default"]["ENGINE"],
        "database_name": str(settings.DATABASES["default"]["NAME"]),
        "using_postgres": settings.USING_POSTGRES,
        "broker": settings.CELERY_BROKER_URL,
        "broker_transport": getattr(settings, "CELERY_BROKER_TRANSPORT", None),
        "artifact_storage": settings.ARTIFACT_STORAGE,
        "artifacts_backend": settings.STORAGES["artifacts"]["BACKEND"],
        "debug": settings.DEBUG,
        "upload_max_mb": settings.UPLOAD_MAX_MB,
        "hypermodels": sorted(hypermodel_entries()),
        "request_metrics": settings.METRICS_ENABLED and settings.METRICS_MIDDLEWARE in settings.MIDDLEWARE,
    }
except ImproperlyConfigured as exc:
    result = {"error": "ImproperlyConfigured", "message": str(exc)}
print("RESULT:" + json.dumps(result))
"""


def _settings_with(tmp_path: Path, **variables: str) -> dict:
    # Start from a clean slate: none of the test run's own deployment variables leak in.
    return run_in_fresh_process(SCRIPT, {"TUNEBOARD_VAR_DIR": str(tmp_path / "var"), **variables}, timeout=120)


@pytest.mark.parametrize(
    "variable, value",
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://user:secret@db.example.com/tuneboard"),
        ("DATABASE_URL", "not a url at all"),
        ("CELERY_BROKER_URL", "amqp://x"),
        ("TUNEBOARD_UPLOAD_MAX_MB", "0"),
        ("TUNEBOARD_UPLOAD_MAX_MB", "fifty"),
        ("TUNEBOARD_ARTIFACT_STORAGE", "s3"),
        ("TUNEBOARD_ARTIFACT_CHUNK_BYTES", "10"),
        ("TUNEBOARD_HYPERMODELS", "nonsense"),
        ("TUNEBOARD_HYPERMODELS", "dense=my.models:build"),
        ("TUNEBOARD_METRICS", "maybe"),
    ],
)
def test_a_bad_value_fails_with_improperly_configured_naming_the_variable(
    tmp_path, variable, value
):
    result = _settings_with(tmp_path, **{variable: value})

    assert result.get("error") == "ImproperlyConfigured", result
    assert variable in result["message"]


def test_the_defaults_run_embedded_on_sqlite_the_filesystem_broker_and_filesystem_artifacts(
    tmp_path,
):
    result = _settings_with(tmp_path)

    assert "error" not in result, result
    assert result["engine"] == "django.db.backends.sqlite3"
    assert result["database_name"] == str(tmp_path / "var" / "tuneboard.sqlite3")
    assert result["using_postgres"] is False
    assert result["broker"] == "filesystem://"
    assert result["broker_transport"] == "webapp.filesystem_broker:Transport"  # messages written atomically
    assert result["artifact_storage"] == "filesystem"
    assert result["artifacts_backend"] == "django.core.files.storage.FileSystemStorage"
    assert result["debug"] is False
    assert result["upload_max_mb"] == 50
    assert result["hypermodels"] == sorted(BUILTIN)
    assert result["request_metrics"] is True


def test_a_postgres_database_url_keeps_artifacts_in_the_database(tmp_path):
    result = _settings_with(
        tmp_path,
        DATABASE_URL="postgres://tuneboard@db.example.com:5432/tuneboard",
        CELERY_BROKER_URL="redis://redis.example.com:6379/0",
    )

    assert "error" not in result, result
    assert result["engine"] == "django.db.backends.postgresql"
    assert result["using_postgres"] is True
    assert result["artifact_storage"] == "database"
    assert result["artifacts_backend"] == "experiments.storage.DatabaseStorage"
    assert result["broker"] == "redis://redis.example.com:6379/0"
    assert result["broker_transport"] is None


def test_postgres_can_still_keep_artifacts_on_a_shared_filesystem_when_asked(tmp_path):
    result = _settings_with(
        tmp_path,
        DATABASE_URL="postgres://tuneboard@db.example.com:5432/tuneboard",
        TUNEBOARD_ARTIFACT_STORAGE="filesystem",
    )

    assert result["artifact_storage"] == "filesystem"
    assert result["artifacts_backend"] == "django.core.files.storage.FileSystemStorage"


def test_good_values_are_read(tmp_path):
    result = _settings_with(
        tmp_path,
        DEBUG="yes",
        TUNEBOARD_UPLOAD_MAX_MB="5",
        TUNEBOARD_HYPERMODELS="tiny=tests.fixtures.hypermodels:build_tiny, other=pkg.mod:build",
    )

    assert (result["debug"], result["upload_max_mb"]) == (True, 5)
    assert _settings_with(tmp_path, TUNEBOARD_METRICS="off")["request_metrics"] is False
    assert result["hypermodels"] == sorted([*BUILTIN, "other", "tiny"])


@pytest.mark.parametrize(
    "variable, value",
    [
        ("DATABASE_URL", "mysql://tuneboard:hunter2secret@db.example.com/tuneboard"),
        ("CELERY_BROKER_URL", "amqp://tuneboard:hunter2secret@rabbit.example.com//"),
    ],
)
def test_a_bad_url_is_reported_without_its_password(tmp_path, variable, value):
    result = _settings_with(tmp_path, **{variable: value})

    assert variable in result["message"]
    assert "hunter2secret" not in result["message"]
    assert "tuneboard:***@" in result["message"]
