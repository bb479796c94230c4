"""Lemon Squeezy: `X-Signature` = hex HMAC-SHA256 of the body with the webhook's signing secret.

Lemon Squeezy sends no event id, so the key is derived from the signed body:
`<meta.event_name>:<data.type>:<data.id>:<sha256 of data>`, where the digest is taken over the
resource snapshot `data` serialised canonically (sorted keys, no spaces). A retry carries the
same snapshot and is a duplicate; a later event on the same resource carries a new
`updated_at` (or other changed attributes) and is new. The limits of that derivation are in
docs/sources/lemonsqueezy.md. Lemon Squeezy signs no timestamp.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from hookinbox._errors import PayloadError
from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import Identity, event_key, lookup, parse_json_object, parse_time
from hookinbox.sources._signatures import Headers


def snapshot_digest(data: Any) -> str:
    """SHA-256 of the resource snapshot, independent of key order and white space."""
    try:
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (ValueError, RecursionError) as exc:
        raise PayloadError("data cannot be serialised canonically") from exc
    return hashlib.sha256(canonical.encode()).hexdigest()


class LemonSqueezy(HMACPresetSource):
    default_name = "lemonsqueezy"
    # Three automatic retries within minutes; a resend from the dashboard has no stated limit.
    redelivery_window = timedelta(days=3)
    stored_headers = ("x-signature", "x-event-name")
    preset = HMACPreset("X-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event_name = event_key(lookup(payload, "meta.event_name"), "meta.event_name")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise PayloadError("no data object in the delivery")
        resource_type = event_key(data.get("type"), "data.type")
        resource_id = event_key(data.get("id"), "data.id")
        key = f"{event_name}:{resource_type}:{resource_id}:{snapshot_digest(data)}"
        occurred = parse_time(lookup(data, "attributes.updated_at")) or parse_time(
            lookup(data, "attributes.created_at")
        )
        return Identity(
            event_id=event_key(key),
            event_type=event_name,
            occurred_at=occurred,
            payload=payload,
        )


def sent_headers(
    source: LemonSqueezy, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    event_name = fields.pop("event_name", None)
    if event_name is None:
        try:
            event_name = json.loads(body)["meta"]["event_name"]
        except (ValueError, KeyError, TypeError):
            event_name = None
    return {} if event_name is None else {"X-Event-Name": str(event_name)}


PROVIDER = declare(
    LemonSqueezy,
    headers=sent_headers,
    example=lambda keys: LemonSqueezy(secret="lemon-example"),
    event=lambda tag: {
        "meta": {"event_name": "order_created"},
        "data": {"type": "orders", "id": tag},
    },
)
