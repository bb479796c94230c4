"""Zoom: `x-zm-signature: v0=<hex>`, HMAC-SHA256 over `v0:{x-zm-request-timestamp}:{body}`.

The key is the app's secret token. A verified `endpoint.url_validation` (sent when the URL is
saved, then every 72 hours) is answered with its `plainToken` and `encryptedToken`, the hex
HMAC-SHA256 of the plain token under the same secret, and nothing is stored.

Zoom's body names no delivery: `{"event", "event_ts", "payload"}`. A retry resends the same
body, so the key is `{event}:{event_ts}:{digest}`, the digest being the body's SHA-256 (its
first 32 hex digits): the same event redelivered has the same key, two events of one type in
one millisecond (two meetings ending) have two.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from hookinbox._errors import PayloadError
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import (
    Headers,
    decode_digests,
    hmac_digest,
    matches_any,
    require_header,
    verify_timestamped,
)

URL_VALIDATION = "endpoint.url_validation"


class Zoom(TimestampedSource):
    default_name = "zoom"
    # Three retries: 5, 25 and 85 minutes after the first attempt; kept a day for margin.
    redelivery_window = timedelta(days=1)
    stored_headers = ("x-zm-signature", "x-zm-request-timestamp", "x-zm-trackingid")
    signature_headers = ("x-zm-signature", "x-zm-request-timestamp")

    def _signed(self, headers: Headers) -> tuple[list[bytes], str]:
        candidates = decode_digests(headers, "x-zm-signature", what="x-zm-signature", prefix="v0=")
        return candidates, require_header(headers, "x-zm-request-timestamp")

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates, timestamp_text = self._signed(headers)
        verify_timestamped(
            self._keys,
            candidates,
            timestamp_text,
            body,
            now=now,
            tolerance=self.tolerance,
            prefix=b"v0:",
            separator=b":",
        )

    def handshake(self, headers: Headers, body: bytes) -> dict[str, Any] | None:
        if URL_VALIDATION.encode() not in body:  # spare every event a second parse
            return None
        payload = parse_json_object(body)
        if payload.get("event") != URL_VALIDATION:
            return None
        inner = payload.get("payload")
        plain = inner.get("plainToken") if isinstance(inner, dict) else None
        if optional_text(plain, limit=1024) is None:
            raise PayloadError("endpoint.url_validation without a usable plainToken")
        assert isinstance(plain, str)
        key = self._signing_key(headers, body)
        return {"plainToken": plain, "encryptedToken": hmac_digest(key, plain.encode()).hex()}

    def _signing_key(self, headers: Headers, body: bytes) -> bytes:
        """The secret that signed this request: while a secret is rotated, Zoom validates
        with the one it signs with, so the token is encrypted with that one."""
        candidates, timestamp_text = self._signed(headers)
        signed = b"v0:" + timestamp_text.strip().encode() + b":" + body
        for key in self._keys:
            if matches_any(hmac_digest(key, signed), candidates):
                return key
        return self._keys[0]

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event = event_key(payload.get("event"), "event")
        event_ts = event_key(payload.get("event_ts"), "event_ts")
        digest = hashlib.sha256(body).hexdigest()[:32]
        millis = payload.get("event_ts")
        occurred = parse_time(millis / 1000) if isinstance(millis, int) else None
        return Identity(
            event_id=event_key(f"{event}:{event_ts}:{digest}"),
            event_type=optional_text(event),
            occurred_at=occurred,
            payload=payload,
        )


def sign(source: Zoom, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), f"v0:{t}:".encode() + body)
    return {
        **json_headers(fields),
        "User-Agent": "Zoom Marketplace/1.0a",
        "x-zm-signature": f"v0={digest}",
        "x-zm-request-timestamp": str(t),
    }


PROVIDER = provider(
    Zoom,
    sign=sign,
    example=lambda keys: Zoom(secret="zoom-example"),
    event=lambda tag: {
        "event": "meeting.started",
        "event_ts": int(tag, 36) % 10**12,
        "payload": {},
    },
    signature_header="x-zm-signature",
)
