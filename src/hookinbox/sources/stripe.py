"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 over `{t}.{body}`.

The `whsec_...` secret is the HMAC key as it stands (UTF-8), not base64-decoded. Any `v1`
entry may match (Stripe sends one per active secret while a secret is rolled). The key is the
body's `id` (`evt_...`), stable across retries; `t` and the signature change on every attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hookinbox._errors import BadSignature
from hookinbox.sources._base import (
    Headers,
    Identity,
    Source,
    check_tolerance,
    event_key,
    hmac_digest,
    matches_any,
    optional_text,
    parse_json_object,
    parse_time,
    parse_timestamp,
    require_header,
    secrets_tuple,
)

DEFAULT_TOLERANCE = 300.0


class Stripe(Source):
    default_name = "stripe"
    # Automatic retries for 3 days, manual resend from the dashboard within 30 (seed 000).
    redelivery_window = timedelta(days=30)
    stored_headers = ("stripe-signature",)

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(name=name)
        self._keys = [s.encode() for s in secrets_tuple(secret)]
        self.tolerance = tolerance

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        header = require_header(headers, "stripe-signature")
        timestamp_text: str | None = None
        candidates: list[bytes] = []
        for item in header.split(","):
            scheme, sep, value = item.strip().partition("=")
            if not sep:
                continue
            if scheme == "t" and timestamp_text is None:
                timestamp_text = value
            elif scheme == "v1":
                try:
                    candidates.append(bytes.fromhex(value))
                except ValueError:
                    continue  # a malformed entry cannot match; another one may
        if timestamp_text is None:
            raise BadSignature("Stripe-Signature has no timestamp")
        if not candidates:
            raise BadSignature("Stripe-Signature has no v1 signature")
        timestamp = parse_timestamp(timestamp_text)
        signed = timestamp_text.strip().encode() + b"." + body
        if not any([matches_any(hmac_digest(key, signed), candidates) for key in self._keys]):
            raise BadSignature()
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("type")),
            occurred_at=parse_time(payload.get("created")),
            payload=payload,
        )
