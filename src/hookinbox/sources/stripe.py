"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 over `{t}.{body}`.

The `whsec_...` secret is the HMAC key as it stands (UTF-8), not base64-decoded. Any `v1`
entry may match (Stripe sends one per active secret while a secret is rolled). The key is the
body's `id` (`evt_...`), stable across retries; `t` and the signature change on every attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hookinbox.sources._base import (
    Headers,
    Identity,
    Source,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
    require_header,
    timestamped_signatures,
    utf8_keys,
    verify_timestamped,
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
        self._keys = utf8_keys(secret)
        self.tolerance = tolerance

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        timestamp_text, candidates = timestamped_signatures(
            require_header(headers, "stripe-signature"),
            what="Stripe-Signature",
            separator=",",
            timestamp_name="t",
            signature_name="v1",
        )
        verify_timestamped(
            self._keys, candidates, timestamp_text, body, now=now, tolerance=self.tolerance
        )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("type")),
            occurred_at=parse_time(payload.get("created")),
            payload=payload,
        )
