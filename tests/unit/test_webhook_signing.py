"""Webhook calls are signed with HMAC-SHA256 over the timestamp, a dot and the raw body; a
receiver verifies with the secret and refuses old timestamps. Retries back off exponentially."""

import hashlib
import hmac
import json

import pytest

from experiments.security.webhook_signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    body_bytes,
    new_secret,
    signature,
    signed_headers,
    verify,
)
from experiments.services.notification_delivery import retry_delay

SECRET = "s3cret-s3cret-s3cret"
PAYLOAD = {"text": "[Acme] Study “digits” finished", "event": "study.completed", "study": {"id": 7}}


def test_the_signature_is_the_hex_hmac_sha256_of_timestamp_dot_body():
    body = body_bytes(PAYLOAD)
    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature(SECRET, "1700000000", body) == f"sha256={expected}"


def test_the_headers_carry_event_delivery_timestamp_and_a_signature_that_verifies():
    body = body_bytes(PAYLOAD)
    headers = signed_headers(secret=SECRET, body=body, event="study.completed", delivery_id=42, now=1_700_000_000.7)
    assert headers[TIMESTAMP_HEADER] == "1700000000"
    assert headers[EVENT_HEADER] == "study.completed" and headers[DELIVERY_HEADER] == "42"
    assert headers["Content-Type"] == "application/json"
    assert verify(secret=SECRET, body=body, timestamp=headers[TIMESTAMP_HEADER],
                  signature_header=headers[SIGNATURE_HEADER], now=1_700_000_010)


def _flip_last(hex_signature: str) -> str:
    return hex_signature[:-1] + ("1" if hex_signature[-1] == "0" else "0")


@pytest.mark.parametrize("change", ["body", "secret", "timestamp", "signature"])
def test_any_change_breaks_the_signature(change):
    body = body_bytes(PAYLOAD)
    headers = signed_headers(secret=SECRET, body=body, event="study.completed", delivery_id=1, now=1_700_000_000)
    args = {"secret": SECRET, "body": body, "timestamp": headers[TIMESTAMP_HEADER],
            "signature_header": headers[SIGNATURE_HEADER], "now": 1_700_000_000}
    assert verify(**args)
    changed = {"body": body.replace(b"7", b"8"), "secret": SECRET + "x", "timestamp": "1700000001",
               "signature": _flip_last(headers[SIGNATURE_HEADER])}
    args["signature_header" if change == "signature" else change] = changed[change]
    assert not verify(**args)


def test_a_replayed_call_with_an_old_timestamp_is_refused():
    body = body_bytes(PAYLOAD)
    headers = signed_headers(secret=SECRET, body=body, event="test", delivery_id=1, now=1_700_000_000)
    assert not verify(secret=SECRET, body=body, timestamp=headers[TIMESTAMP_HEADER],
                      signature_header=headers[SIGNATURE_HEADER], now=1_700_000_000 + 301)
    assert not verify(secret=SECRET, body=body, timestamp="not a number", signature_header="sha256=00")


def test_the_body_is_compact_utf8_json_of_the_payload():
    body = body_bytes(PAYLOAD)
    assert json.loads(body) == PAYLOAD
    assert "“digits”".encode() in body and b", " not in body


def test_generated_secrets_are_long_and_different():
    first, second = new_secret(), new_secret()
    assert first != second and len(first) >= 40


def test_retries_wait_the_base_then_double_each_time(settings):
    settings.NOTIFY_RETRY_SECONDS = 30
    assert [retry_delay(n) for n in range(1, 6)] == [30, 60, 120, 240, 480]
    assert [retry_delay(n, base=1) for n in range(1, 4)] == [1, 2, 4]
