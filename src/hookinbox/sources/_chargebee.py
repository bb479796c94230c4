"""Chargebee: no signature. HTTP basic credentials written into the webhook's settings are the
only proof, checked as Postmark's are (`BasicAuthSource`: constant time, never stored).

Chargebee signs nothing (its own documentation calls a key in the URL the less secure
alternative); whoever sees one request can send any body, and nothing dates it. The
credentials are a shared password, so serve the endpoint over HTTPS only.

The key is the body's `id` (`ev_...`), the event's, which every retry and a resend from the
event log repeat; Chargebee says its webhooks may come more than once and out of order. The
type is `event_type` (`subscription_created`), the time `occurred_at` (Unix seconds). The
body also reports the delivery itself (`webhook_status`, `webhooks`), which may differ from one
attempt to the next, so those fields are left out when a redelivery is compared.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._identity import (
    Identity,
    event_key,
    fingerprint_without,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._postmark import BasicAuthSource, sign_basic
from hookinbox.sources._provider import provider
from hookinbox.sources._signatures import Headers

DELIVERY_FIELDS = ("webhook_status", "webhooks")
"""The body's report of the delivery, not of the event."""


class Chargebee(BasicAuthSource):
    """Chargebee's webhooks, authenticated by the basic credentials set for the webhook."""

    default_name = "chargebee"
    # Up to 7 retries over about 3 days 7 hours (2 min, 6 min, 30 min, 1 h, 5 h, 1 d, 2 d),
    # then a resend by hand from the event log: a week covers both.
    redelivery_window = timedelta(days=7)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(payload.get("id")),
            event_type=optional_text(payload.get("event_type")),
            occurred_at=parse_time(payload.get("occurred_at")),
            payload=payload,
            fingerprint=fingerprint_without(payload, *DELIVERY_FIELDS),
        )


def sign(source: Chargebee, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Chargebee's recipe: the configured user name and password as HTTP basic credentials.
    return {**sign_basic(source, body, t, fields), "User-Agent": "ChargeBee"}


PROVIDER = provider(
    Chargebee,
    sign=sign,
    example=lambda keys: Chargebee(username="chargebee", password="chargebee-example"),
    event=lambda tag: {
        "id": f"ev_{tag}",
        "occurred_at": 1_700_000_000,
        "source": "admin_console",
        "object": "event",
        "api_version": "v2",
        "event_type": "subscription_created",
        "webhook_status": "scheduled",
        "content": {"subscription": {"id": f"sub_{tag}", "status": "active"}},
    },
    signature_header="Authorization",
)
