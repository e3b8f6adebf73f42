"""How Tuneboard signs webhook calls and a receiver checks one: timestamp, dot, raw body, so a captured call
cannot be replayed later."""

import hashlib
import hmac
import json
import secrets
import time

SIGNATURE_HEADER = "X-Tuneboard-Signature"
TIMESTAMP_HEADER = "X-Tuneboard-Timestamp"
EVENT_HEADER = "X-Tuneboard-Event"
DELIVERY_HEADER = "X-Tuneboard-Delivery"
# How far a receiver should let a timestamp be from its own clock.
TOLERANCE_SECONDS = 300
MIN_SECRET_LENGTH = 16


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def body_bytes(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def signed_headers(*, secret: str, body: bytes, event: str, delivery_id: int, now: float | None = None) -> dict:
    timestamp = str(int(time.time() if now is None else now))
    return {
        "Content-Type": "application/json",
        "User-Agent": "Tuneboard-Webhooks/1",
        EVENT_HEADER: event,
        DELIVERY_HEADER: str(delivery_id),
        TIMESTAMP_HEADER: timestamp,
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


def verify(*, secret: str, body: bytes, timestamp: str, signature_header: str, now: float | None = None,
           tolerance: int = TOLERANCE_SECONDS) -> bool:
    """What a receiver does: recompute the HMAC over timestamp + "." + raw body, compare in
    constant time, and refuse a timestamp too far from now."""
    try:
        sent = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs((time.time() if now is None else now) - sent) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), signature_header or "")
