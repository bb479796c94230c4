"""Coinbase Commerce: `X-CC-Webhook-Signature: <hex>`, HMAC-SHA256 of the body keyed with the
webhook's shared secret.

The key is the **shared secret** of the account's webhook subscriptions (Settings,
Notifications), as its UTF-8 bytes. Coinbase Commerce signs no time.

The body wraps the event: `{"id": ..., "attempt_number": 1, "scheduled_for": ..., "event":
{...}}`. The key is the event's `id` (a UUID), which every attempt repeats; the type is
`event.type` (`charge:confirmed`), the time `event.created_at`. `attempt_number` and
`scheduled_for` name the attempt, so a retry's body differs: it is told from a key conflict
by the event alone (`Identity.fingerprint`).
"""

from __future__ import annotations

from datetime import timedelta

from hookinbox._errors import PayloadError
from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    canonical_json,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers


class CoinbaseCommerce(HMACPresetSource):
    default_name = "coinbase-commerce"
    # Exponential backoff for up to 3 days (an hour apart at most); a day's margin.
    redelivery_window = timedelta(days=4)
    # Coinbase Commerce's recipe: the hex HMAC-SHA256 of the raw body, keyed with the secret.
    preset = HMACPreset("X-CC-Webhook-Signature")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event = payload.get("event")
        if not isinstance(event, dict):
            raise PayloadError("no event object in the delivery")
        return Identity(
            event_id=event_key(event.get("id")),
            event_type=optional_text(event.get("type")),
            occurred_at=parse_time(event.get("created_at")),
            payload=payload,
            fingerprint=canonical_json(event),
        )


PROVIDER = declare(
    CoinbaseCommerce,
    event=lambda tag: {
        "id": 1,
        "attempt_number": 1,
        "scheduled_for": "2026-11-30T12:00:01Z",
        "event": {
            "id": f"evt-{tag}",
            "resource": "event",
            "type": "charge:confirmed",
            "api_version": "2018-03-22",
            "created_at": "2026-11-30T12:00:00Z",
            "data": {"code": f"C{tag}", "name": "coffee"},
        },
    },
)
