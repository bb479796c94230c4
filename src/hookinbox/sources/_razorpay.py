"""Razorpay: `X-Razorpay-Signature: <hex>`, HMAC-SHA256 of the body with the webhook's secret.

The secret is the one chosen when the webhook was set up in Razorpay's dashboard (not the
API key's secret). Razorpay signs no timestamp, so nothing bounds a replay but the key.

The key is the `X-Razorpay-Event-Id` header: Razorpay's documentation names it as the way to
recognise a duplicate, and the body has no event id of its own (`payload` names the entities:
one payment has `payment.authorized`, then `payment.captured`, ...). The header is not
signed, so a captured delivery replayed under a new id would be stored again: the same limit
as Linear's and GitHub's unsigned delivery ids. The type is the body's `event`
(`payment.captured`), the time its `created_at` (Unix seconds).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import body_id
from hookinbox.sources._signatures import Headers


class Razorpay(HMACPresetSource):
    default_name = "razorpay"
    # Retried with exponential backoff for 24 hours after the event was created; then the
    # webhook is disabled until re-enabled by hand.
    redelivery_window = timedelta(days=2)
    stored_headers = ("x-razorpay-signature", "x-razorpay-event-id")
    # Razorpay's recipe: the hex HMAC-SHA256 of the raw body, keyed with the webhook secret.
    preset = HMACPreset("X-Razorpay-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(headers.get("x-razorpay-event-id"), "X-Razorpay-Event-Id header"),
            event_type=optional_text(payload.get("event")),
            occurred_at=parse_time(payload.get("created_at")),
            payload=payload,
        )


def sent_headers(source: Razorpay, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return {"X-Razorpay-Event-Id": fields.pop("event_id", None) or body_id(source, body)}


PROVIDER = declare(
    Razorpay,
    headers=sent_headers,
    event=lambda tag: {
        "entity": "event",
        "event": "payment.captured",
        "contains": ["payment"],
        "payload": {"payment": {"entity": {"id": f"pay_{tag}", "status": "captured"}}},
        "created_at": 1_700_000_000,
    },
)
