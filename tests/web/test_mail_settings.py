"""E-mail settings come from the environment: mail is printed to the console until EMAIL_HOST
names a server, then goes out by SMTP; bad values stop start-up naming the variable."""

import os

import pytest

from tests.web.fresh_process import run_in_fresh_process

SCRIPT = r"""
import json
from django.core.exceptions import ImproperlyConfigured

try:
    from django.conf import settings

    result = {name: getattr(settings, name) for name in (
        "EMAIL_BACKEND", "EMAIL_HOST", "EMAIL_PORT", "EMAIL_HOST_USER", "EMAIL_HOST_PASSWORD", "EMAIL_USE_TLS",
        "EMAIL_USE_SSL", "EMAIL_TIMEOUT", "DEFAULT_FROM_EMAIL", "INVITATION_DAYS")}
except ImproperlyConfigured as exc:
    result = {"error": "ImproperlyConfigured", "message": str(exc)}
print("RESULT:" + json.dumps(result))
"""
MAIL_PREFIXES = ("EMAIL_", "DEFAULT_FROM_EMAIL")


def _settings_with(tmp_path, monkeypatch, **variables: str) -> dict:
    for name in list(os.environ):
        if name.startswith(MAIL_PREFIXES):  # the machine's own mail settings stay out
            monkeypatch.delenv(name)
    return run_in_fresh_process(SCRIPT, {"TUNEBOARD_VAR_DIR": str(tmp_path / "var"), **variables}, timeout=60)


def test_without_a_mail_server_mail_goes_to_the_console(tmp_path, monkeypatch):
    result = _settings_with(tmp_path, monkeypatch)
    assert result["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    assert result["INVITATION_DAYS"] == 7
    assert result["EMAIL_TIMEOUT"] == 10


def test_a_mail_server_is_used_by_smtp_with_its_login(tmp_path, monkeypatch):
    result = _settings_with(
        tmp_path, monkeypatch, EMAIL_HOST="smtp.example.com", EMAIL_HOST_USER="tuneboard", EMAIL_HOST_PASSWORD="pw",
        EMAIL_USE_TLS="true", DEFAULT_FROM_EMAIL="Tuneboard <tb@example.com>", TUNEBOARD_INVITATION_DAYS="3",
    )
    assert result["EMAIL_BACKEND"] == "django.core.mail.backends.smtp.EmailBackend"
    assert (result["EMAIL_HOST"], result["EMAIL_PORT"], result["EMAIL_USE_TLS"]) == ("smtp.example.com", 587, True)
    assert (result["EMAIL_HOST_USER"], result["EMAIL_HOST_PASSWORD"]) == ("tuneboard", "pw")
    assert result["DEFAULT_FROM_EMAIL"] == "Tuneboard <tb@example.com>"
    assert result["INVITATION_DAYS"] == 3


@pytest.mark.parametrize(
    "variables, named",
    [
        ({"EMAIL_BACKEND": "no.such.Backend"}, "EMAIL_BACKEND"),
        ({"EMAIL_BACKEND": "smtp"}, "EMAIL_BACKEND"),
        ({"EMAIL_USE_TLS": "true", "EMAIL_USE_SSL": "true"}, "EMAIL_USE_SSL"),
        ({"EMAIL_PORT": "smtp"}, "EMAIL_PORT"),
        ({"TUNEBOARD_INVITATION_DAYS": "0"}, "TUNEBOARD_INVITATION_DAYS"),
    ],
)
def test_a_bad_mail_value_fails_with_improperly_configured_naming_the_variable(tmp_path, monkeypatch, variables,
                                                                               named):
    result = _settings_with(tmp_path, monkeypatch, **variables)
    assert result.get("error") == "ImproperlyConfigured", result
    assert named in result["message"]
