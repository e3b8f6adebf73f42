"""The readers behind the security settings: the signing key (required unless DEBUG) and the
proxy's HTTPS header, each failing with ImproperlyConfigured naming the variable."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from webapp.env import DEBUG_SECRET_KEY, env_bool, env_float, env_header_value, env_int, env_secret_key


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("TB_KEY", "TB_HEADER", "TB_INT", "TB_BOOL"):
        monkeypatch.delenv(name, raising=False)


STRONG = "Kq3-vX9_pL2mZ7rT4wY8nB1cD6fG0hJ5sA2eU9iO7kM3qW8xZ4yV1"


def test_a_set_secret_key_is_used_as_given(monkeypatch):
    monkeypatch.setenv("TB_KEY", f"  {STRONG}  ")
    assert env_secret_key("TB_KEY", debug=False) == STRONG


@pytest.mark.parametrize("value", ["a-long-random-value", "x" * 80, "abab" * 20, "django-insecure-" + STRONG])
def test_a_weak_secret_key_is_refused_unless_debugging(monkeypatch, value):
    monkeypatch.setenv("TB_KEY", value)
    with pytest.raises(ImproperlyConfigured, match="TB_KEY is too weak"):
        env_secret_key("TB_KEY", debug=False)
    assert env_secret_key("TB_KEY", debug=True) == value  # DEBUG is for development: any key goes


@pytest.mark.parametrize("value", [None, "", "   "])
def test_without_a_secret_key_debug_off_refuses_and_says_how_to_set_one(monkeypatch, value):
    if value is not None:
        monkeypatch.setenv("TB_KEY", value)
    with pytest.raises(ImproperlyConfigured) as error:
        env_secret_key("TB_KEY", debug=False)
    message = str(error.value)
    assert message.startswith("TB_KEY is not set and DEBUG is off.")
    assert "secrets.token_urlsafe(50)" in message
    assert ".env" in message and "tuneboard-secrets" in message and "var/secret_key" in message


def test_without_a_secret_key_debug_on_uses_a_key_marked_insecure():
    assert env_secret_key("TB_KEY", debug=True) == DEBUG_SECRET_KEY
    assert DEBUG_SECRET_KEY.startswith("django-insecure-")  # what check --deploy flags


@pytest.mark.parametrize("debug", [False, True])
def test_the_placeholder_of_the_example_secret_is_refused(monkeypatch, debug):
    monkeypatch.setenv("TB_KEY", "CHANGE-ME-to-a-long-random-string")
    with pytest.raises(ImproperlyConfigured, match="TB_KEY is still the placeholder"):
        env_secret_key("TB_KEY", debug=debug)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("HTTP_X_FORWARDED_PROTO,https", ("HTTP_X_FORWARDED_PROTO", "https")),
        (" HTTP_X_FORWARDED_SSL , on ", ("HTTP_X_FORWARDED_SSL", "on")),
        ("", None),
        ("  ", None),
    ],
)
def test_a_proxy_header_is_read(monkeypatch, raw, expected):
    monkeypatch.setenv("TB_HEADER", raw)
    assert env_header_value("TB_HEADER", ("HTTP_DEFAULT", "x")) == expected


def test_an_unset_proxy_header_is_the_default():
    assert env_header_value("TB_HEADER", ("HTTP_X_FORWARDED_PROTO", "https")) == ("HTTP_X_FORWARDED_PROTO", "https")
    assert env_header_value("TB_HEADER", None) is None


@pytest.mark.parametrize(
    "raw",
    ["HTTP_X_FORWARDED_PROTO", "X-Forwarded-Proto,https", "http_x_forwarded_proto,https", "HTTP_X_FORWARDED_PROTO,",
     ",https", "HTTP_X_FORWARDED_PROTO,https,http", "HTTP_X FORWARDED,https"],
)
def test_a_malformed_proxy_header_is_refused_with_an_example(monkeypatch, raw):
    monkeypatch.setenv("TB_HEADER", raw)
    with pytest.raises(ImproperlyConfigured) as error:
        env_header_value("TB_HEADER", None)
    assert str(error.value).startswith("TB_HEADER must be HEADER,VALUE")
    assert "HTTP_X_FORWARDED_PROTO,https" in str(error.value) and repr(raw) in str(error.value)


@pytest.mark.parametrize(("raw", "problem"), [("one year", "whole number"), ("-1", "at least 0"), ("3.5", "whole")])
def test_hsts_seconds_must_be_a_whole_number_of_at_least_zero(monkeypatch, raw, problem):
    monkeypatch.setenv("TB_INT", raw)
    with pytest.raises(ImproperlyConfigured, match=f"TB_INT must be .*{problem}"):
        env_int("TB_INT", 0, minimum=0)


@pytest.mark.parametrize("raw", ["one point", "-0.1", "nan", "inf"])
def test_a_fraction_must_be_a_finite_number_of_at_least_its_minimum(monkeypatch, raw):
    monkeypatch.setenv("TB_FLOAT", raw)
    with pytest.raises(ImproperlyConfigured, match="TB_FLOAT must be (a|at least)"):
        env_float("TB_FLOAT", 0.01, minimum=0.0)
    monkeypatch.setenv("TB_FLOAT", "0.05")
    assert env_float("TB_FLOAT", 0.01, minimum=0.0) == 0.05


def test_switches_read_true_and_false_and_refuse_anything_else(monkeypatch):
    monkeypatch.setenv("TB_BOOL", "On")
    assert env_bool("TB_BOOL", False) is True
    monkeypatch.setenv("TB_BOOL", "0")
    assert env_bool("TB_BOOL", True) is False
    monkeypatch.setenv("TB_BOOL", "https")
    with pytest.raises(ImproperlyConfigured, match="TB_BOOL must be a boolean"):
        env_bool("TB_BOOL", False)
