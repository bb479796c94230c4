"""Shopify: `X-Shopify-Hmac-Sha256` = base64 HMAC-SHA256 of the body with the app's client secret.

The key is `X-Shopify-Event-Id` (current documentation), falling back to `X-Shopify-Webhook-Id`
(older documentation), scoped by topic: the stored event id is `<topic>:<id>`, so two topics
fired by one shop event are two events, while a retry of one topic's delivery is a duplicate.
Shopify documents that a second subscription to the same topic delivers the same event id; it is
then a duplicate too. The newer Events API drops the `X-` prefix; both are read.
Shopify signs no timestamp, so there is no replay window to check.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox.sources._base import Source
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json, parse_time
from hookinbox.sources._provider import (
    HOUR,
    MINUTE,
    Simulation,
    b64_mac,
    body_id,
    iso,
    json_headers,
    provider,
    secret_key,
)
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import Headers, decode_digests, require_match


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
        candidates = decode_digests(
            headers,
            "x-shopify-hmac-sha256",
            "shopify-hmac-sha256",
            what="X-Shopify-Hmac-Sha256",
            encoding="base64",
        )
        require_match(self._keys, candidates, body)

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


def sign(source: Shopify, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    event_id = fields.pop("event_id", None) or body_id(source, body)
    return {
        **json_headers(fields),
        "X-Shopify-Topic": fields.pop("topic", "orders/create"),
        "X-Shopify-Hmac-Sha256": b64_mac(key, body),
        "X-Shopify-Shop-Domain": fields.pop("shop_domain", "example.myshopify.com"),
        "X-Shopify-API-Version": fields.pop("api_version", "2024-07"),
        "X-Shopify-Webhook-Id": fields.pop("webhook_id", str(uuid.uuid4())),
        "X-Shopify-Event-Id": event_id,
        "X-Shopify-Triggered-At": iso(t),
    }


PROVIDER = provider(
    Shopify,
    sign=sign,
    example=lambda keys: Shopify(secret="shpss_example"),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="X-Shopify-Hmac-Sha256",
    # 8 retries over 4 h (documented since Sept 2024); the intervals are not published [U].
    # Shopify gives up on an answer after 5 s.
    simulation=Simulation(
        retry_delays=(10, 30, MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR),
        ack_timeout=5.0,
        signs_timestamp=False,
        signature_headers=frozenset({"x-shopify-hmac-sha256"}),
    ),
)
