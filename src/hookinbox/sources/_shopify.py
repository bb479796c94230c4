"""Shopify: `X-Shopify-Hmac-Sha256` = base64 HMAC-SHA256 of the body with the app's client secret.

The key is `X-Shopify-Event-Id` (current documentation), falling back to `X-Shopify-Webhook-Id`
(older documentation), scoped by topic: the stored event id is `<topic>:<id>`, so two topics
fired by one shop event are two events, while a retry of one topic's delivery is a duplicate.
Shopify documents that a second subscription to the same topic delivers the same event id; it is
then a duplicate too. The newer Events API drops the `X-` prefix; both are read.
Shopify signs no timestamp, so there is no replay window to check.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hookinbox.sources._base import (
    Headers,
    Identity,
    Source,
    decode_digest,
    event_key,
    optional_text,
    parse_json,
    parse_time,
    require_header,
    require_match,
    utf8_keys,
)


class Shopify(Source):
    default_name = "shopify"
    # 19 retries over 48 h (seed 003); documented since Sept 2024 as 8 over 4 h: keep the longer.
    redelivery_window = timedelta(hours=48)
    stored_headers = (
        "x-shopify-hmac-sha256",
        "shopify-hmac-sha256",
        "x-shopify-event-id",
        "shopify-event-id",
        "x-shopify-webhook-id",
        "shopify-webhook-id",
        "x-shopify-topic",
        "shopify-topic",
        "x-shopify-shop-domain",
        "shopify-shop-domain",
        "x-shopify-triggered-at",
        "shopify-triggered-at",
        "x-shopify-api-version",
        "shopify-api-version",
    )
    signature_headers = ("x-shopify-hmac-sha256", "shopify-hmac-sha256")

    def __init__(self, *, secret: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._keys = utf8_keys(secret)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        encoded = require_header(headers, "x-shopify-hmac-sha256", "shopify-hmac-sha256")
        candidate = decode_digest(encoded, what="X-Shopify-Hmac-Sha256", encoding="base64")
        require_match(self._keys, [candidate], body)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json(body)
        raw_id = (
            headers.get("x-shopify-event-id")
            or headers.get("shopify-event-id")
            or headers.get("x-shopify-webhook-id")
            or headers.get("shopify-webhook-id")
        )
        topic = optional_text(headers.get("x-shopify-topic") or headers.get("shopify-topic"))
        key = event_key(raw_id, "X-Shopify-Event-Id or X-Shopify-Webhook-Id header")
        triggered = headers.get("x-shopify-triggered-at") or headers.get("shopify-triggered-at")
        return Identity(
            event_id=event_key(f"{topic}:{key}" if topic else key),
            event_type=topic,
            occurred_at=parse_time(triggered),
            payload=payload,
        )
