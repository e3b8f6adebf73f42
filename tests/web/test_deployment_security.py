"""A deployment is made secure from its environment: SECRET_KEY is required whenever DEBUG is
off, TUNEBOARD_HTTPS turns on HTTPS redirect, secure cookies, HSTS and the proxy's header at
once (each variable overriding its part), bad values stop start-up naming the variable, and
`manage.py check --deploy` passes with production variables. Each case loads the settings in
a fresh interpreter."""

import os
import secrets
import subprocess
import sys

import pytest

from tests.web.fresh_process import DEPLOYMENT_PREFIXES, ROOT, run_in_fresh_process

SCRIPT = r"""
import json
from django.core.exceptions import ImproperlyConfigured

try:
    from django.conf import settings

    result = {name: getattr(settings, name) for name in (
        "DEBUG", "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD", "SECURE_PROXY_SSL_HEADER", "SECURE_REDIRECT_EXEMPT",
        "TRUSTED_PROXY_COUNT", "AXES_FAILURE_LIMIT", "LOGIN_LOCKOUT_MINUTES")}
    result["cool_off_seconds"] = settings.AXES_COOLOFF_TIME.total_seconds()
    result["secret_key_insecure"] = settings.SECRET_KEY.startswith("django-insecure-")
except ImproperlyConfigured as exc:
    result = {"error": "ImproperlyConfigured", "message": str(exc)}
print("RESULT:" + json.dumps(result))
"""
YEAR = 365 * 24 * 3600
SECURITY_PREFIXES = ("SECURE_", "SESSION_COOKIE_", "CSRF_COOKIE_", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")


def _settings_with(tmp_path, **variables) -> dict:
    return run_in_fresh_process(SCRIPT, {"TUNEBOARD_VAR_DIR": str(tmp_path / "var"), **variables}, timeout=120)


def test_without_tuneboard_https_nothing_assumes_https(tmp_path):
    result = _settings_with(tmp_path)
    assert "error" not in result, result
    assert (result["SECURE_SSL_REDIRECT"], result["SESSION_COOKIE_SECURE"], result["CSRF_COOKIE_SECURE"]) == (
        False, False, False)
    assert (result["SECURE_HSTS_SECONDS"], result["SECURE_PROXY_SSL_HEADER"]) == (0, None)
    assert (result["TRUSTED_PROXY_COUNT"], result["AXES_FAILURE_LIMIT"], result["LOGIN_LOCKOUT_MINUTES"]) == (0, 5, 15)
    assert result["cool_off_seconds"] == 15 * 60


def test_tuneboard_https_turns_everything_on_but_preload(tmp_path):
    result = _settings_with(tmp_path, TUNEBOARD_HTTPS="true")
    assert "error" not in result, result
    assert result["SECURE_SSL_REDIRECT"] and result["SESSION_COOKIE_SECURE"] and result["CSRF_COOKIE_SECURE"]
    assert result["SECURE_HSTS_SECONDS"] == YEAR and result["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert result["SECURE_HSTS_PRELOAD"] is False
    assert result["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_each_explicit_variable_overrides_its_part_of_tuneboard_https(tmp_path):
    result = _settings_with(
        tmp_path, TUNEBOARD_HTTPS="true", SECURE_SSL_REDIRECT="false", SESSION_COOKIE_SECURE="no",
        CSRF_COOKIE_SECURE="0", SECURE_HSTS_SECONDS="3600", SECURE_HSTS_INCLUDE_SUBDOMAINS="off",
        SECURE_HSTS_PRELOAD="yes", SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_SSL,on",
    )
    assert "error" not in result, result
    assert (result["SECURE_SSL_REDIRECT"], result["SESSION_COOKIE_SECURE"], result["CSRF_COOKIE_SECURE"]) == (
        False, False, False)
    assert (result["SECURE_HSTS_SECONDS"], result["SECURE_HSTS_INCLUDE_SUBDOMAINS"], result["SECURE_HSTS_PRELOAD"]) \
        == (3600, False, True)
    assert result["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_SSL", "on"]
    assert _settings_with(tmp_path, TUNEBOARD_HTTPS="true", SECURE_PROXY_SSL_HEADER="")[
        "SECURE_PROXY_SSL_HEADER"] is None


def test_the_explicit_variables_work_without_the_switch(tmp_path):
    result = _settings_with(
        tmp_path, SECURE_SSL_REDIRECT="true", SESSION_COOKIE_SECURE="true", CSRF_COOKIE_SECURE="true",
        SECURE_HSTS_SECONDS="60", SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
        TUNEBOARD_TRUSTED_PROXIES="2", TUNEBOARD_LOGIN_FAILURE_LIMIT="3", TUNEBOARD_LOGIN_LOCKOUT_MINUTES="2",
    )
    assert "error" not in result, result
    assert result["SECURE_SSL_REDIRECT"] and result["SESSION_COOKIE_SECURE"] and result["CSRF_COOKIE_SECURE"]
    assert (result["SECURE_HSTS_SECONDS"], result["SECURE_HSTS_INCLUDE_SUBDOMAINS"]) == (60, False)
    assert result["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert (result["TRUSTED_PROXY_COUNT"], result["AXES_FAILURE_LIMIT"], result["cool_off_seconds"]) == (2, 3, 120)


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("SECURE_HSTS_SECONDS", "one year", "must be a whole number"),
        ("SECURE_HSTS_SECONDS", "-5", "must be at least 0"),
        ("SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto: https", "must be HEADER,VALUE"),
        ("SECURE_PROXY_SSL_HEADER", "HTTP_X_FORWARDED_PROTO", "must be HEADER,VALUE"),
        ("TUNEBOARD_HTTPS", "sometimes", "must be a boolean"),
        ("SECURE_SSL_REDIRECT", "maybe", "must be a boolean"),
        ("SESSION_COOKIE_SECURE", "secure", "must be a boolean"),
        ("CSRF_COOKIE_SECURE", "2", "must be a boolean"),
        ("SECURE_HSTS_INCLUDE_SUBDOMAINS", "all", "must be a boolean"),
        ("SECURE_HSTS_PRELOAD", "please", "must be a boolean"),
        ("TUNEBOARD_TRUSTED_PROXIES", "-1", "must be at least 0"),
        ("TUNEBOARD_LOGIN_FAILURE_LIMIT", "0", "must be at least 1"),
        ("TUNEBOARD_LOGIN_LOCKOUT_MINUTES", "a while", "must be a whole number"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_variable(tmp_path, variable, value, says):
    result = _settings_with(tmp_path, **{variable: value})
    assert result.get("error") == "ImproperlyConfigured", result
    assert result["message"].startswith(f"{variable} {says}"), result["message"]


@pytest.mark.parametrize("deployment", [{"DATABASE_URL": "postgres://tb:pw@db.example.internal/tb"},
                                        {"CELERY_BROKER_URL": "redis://redis.example.internal:6379/0"}])
def test_debug_off_without_a_secret_key_refuses_to_load_outside_the_embedded_mode(tmp_path, deployment):
    result = _settings_with(tmp_path, SECRET_KEY=None, **deployment)
    assert result.get("error") == "ImproperlyConfigured", result
    assert result["message"].startswith("SECRET_KEY is not set and DEBUG is off.")
    assert not (tmp_path / "var" / "secret_key").exists(), "a deployment never makes a key of its own"


def test_debug_on_without_a_secret_key_loads_with_a_key_marked_insecure(tmp_path):
    result = _settings_with(tmp_path, SECRET_KEY=None, DEBUG="true")
    assert "error" not in result, result
    assert result["DEBUG"] is True and result["secret_key_insecure"] is True


# --- manage.py in a subprocess, as a deployment starts it ----------------------------------------

PRODUCTION = {
    "DEBUG": "false",
    "ALLOWED_HOSTS": "tuneboard.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://tuneboard.example.com",
    # Not reached by `check`: the deployment's URLs, as the Secret gives them.
    "DATABASE_URL": "postgres://tuneboard:pw@db.example.internal:5432/tuneboard",
    "CELERY_BROKER_URL": "redis://redis.example.internal:6379/0",
}


def manage(tmp_path, *args, **variables) -> subprocess.CompletedProcess:
    # A deployment's environment, not the suite's: the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE
    # (Playwright drives the live server from the test thread) is not something a server runs with.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(DEPLOYMENT_PREFIXES + SECURITY_PREFIXES) and k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env.update(TUNEBOARD_VAR_DIR=str(tmp_path / "var"), PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="webapp.settings")
    env.update(variables)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def deploy_check(tmp_path, **variables) -> subprocess.CompletedProcess:
    return manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING",
                  SECRET_KEY=secrets.token_urlsafe(50), **PRODUCTION, **variables)


def test_check_deploy_passes_with_tuneboard_https_and_preload(tmp_path):
    done = deploy_check(tmp_path, TUNEBOARD_HTTPS="true", SECURE_HSTS_PRELOAD="true", TUNEBOARD_TRUSTED_PROXIES="1")
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_passes_with_the_explicit_variables(tmp_path):
    done = deploy_check(
        tmp_path, SECURE_SSL_REDIRECT="true", SESSION_COOKIE_SECURE="true", CSRF_COOKIE_SECURE="true",
        SECURE_HSTS_SECONDS="31536000", SECURE_HSTS_INCLUDE_SUBDOMAINS="true", SECURE_HSTS_PRELOAD="true",
        SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https",
    )
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)." in done.stdout


def test_check_deploy_without_https_names_what_is_missing(tmp_path):
    done = deploy_check(tmp_path)
    assert done.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in done.stderr


def test_tuneboard_https_alone_leaves_only_the_preload_opt_in(tmp_path):
    done = deploy_check(tmp_path, TUNEBOARD_HTTPS="true")
    assert done.returncode != 0
    assert "security.W021" in done.stderr
    assert done.stderr.count("(security.") == 1, done.stderr


def test_manage_py_refuses_to_start_without_a_secret_key_when_debug_is_off(tmp_path):
    done = manage(tmp_path, "check", **PRODUCTION)
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set and DEBUG is off." in done.stderr
    assert "secrets.token_urlsafe(50)" in done.stderr


# ids: the random key's own would differ between pytest-xdist's processes, which must collect alike.
@pytest.mark.parametrize("key", ["short", "x" * 60, "ab" * 40, "django-insecure-" + secrets.token_urlsafe(50)],
                         ids=["short", "one-character", "two-characters", "django-insecure"])
def test_a_weak_secret_key_stops_a_deployment_from_starting_and_says_how_to_make_one(tmp_path, key):
    """The keys `check --deploy` calls weak (security.W009: under 50 characters, under 5 different
    ones, Django's insecure prefix) stop every process at start-up, not just the check."""
    done = manage(tmp_path, "check", SECRET_KEY=key, **PRODUCTION)
    assert done.returncode != 0
    assert "SECRET_KEY is too weak" in done.stderr and "secrets.token_urlsafe(50)" in done.stderr
    assert key not in done.stderr, "the key itself never reaches the log"


def test_a_strong_secret_key_passes(tmp_path):
    assert manage(tmp_path, "check", SECRET_KEY=secrets.token_urlsafe(50), **PRODUCTION).returncode == 0
