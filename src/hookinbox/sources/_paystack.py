"""Paystack: `x-paystack-signature: <hex>`, HMAC-SHA512 of the body with the account's secret
key.

The key is the API **secret key** (`sk_live_...`, `sk_test_...`), not a webhook secret:
Paystack has none. Paystack signs no timestamp.

The body names no event id: `{"event": "charge.success", "data": {...}}`. The key is
`<event>:<data.id>`, the event and the id of the object it is about (a transaction, a
transfer, a subscription): a retry repeats both, and one object reaches one state once. The
type is `event`, the time `data.paid_at`, else `data.created_at`.
"""

from __future__ import annotations

from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, HMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers


class Paystack(HMACPresetSource):
    default_name = "paystack"
    # Live mode: every 3 minutes for the first 4 tries, then hourly for 72 hours.
    redelivery_window = timedelta(days=4)
    # Paystack's recipe: the hex HMAC-SHA512 of the raw body, keyed with the secret key.
    preset = HMACPreset("x-paystack-signature", algorithm="sha512")

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        event = event_key(payload.get("event"), "event")
        subject = event_key(lookup(payload, "data.id"), "data.id")
        paid = parse_time(lookup(payload, "data.paid_at"))
        return Identity(
            event_id=event_key(f"{event}:{subject}"),
            event_type=optional_text(event),
            occurred_at=paid or parse_time(lookup(payload, "data.created_at")),
            payload=payload,
        )


PROVIDER = declare(
    Paystack,
    example=lambda keys: Paystack(secret="sk_test_paystack_example"),
    event=lambda tag: {
        "event": "charge.success",
        "data": {
            "id": tag,
            "reference": f"ref-{tag}",
            "status": "success",
            "paid_at": "2023-11-14T22:13:20.000Z",
        },
    },
)
