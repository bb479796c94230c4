"""Customer.io reporting webhooks: `X-CIO-Signature: <hex>`, HMAC-SHA256 of
`v0:{X-CIO-Timestamp}:{body}` keyed with the webhook signing key.

The key is the reporting webhook's **signing key** (the Reporting Webhooks integration page),
as its UTF-8 bytes. The timestamp (Unix seconds) is signed with the body.

Customer.io states no window for it, and retries a failed call for up to 7 days without
saying whether a retry is signed anew: a window would refuse a retry sent as it was, and the
events behind it, which Customer.io holds back until that one succeeds. So there is none by
default; `tolerance=` sets one, both ways, for whoever has seen retries signed anew.

The key of an event is the body's `event_id`; the type is `<object_type>.<metric>`
(`email.delivered`), the time `timestamp`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from hookinbox.sources._hmac_preset import HMACPreset, TimestampedHMACPresetSource, declare
from hookinbox.sources._identity import (
    Identity,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._signatures import Headers


class CustomerIO(TimestampedHMACPresetSource):
    default_name = "customerio"
    # Retries over 7 days, with exponential backoff; a day's margin.
    redelivery_window = timedelta(days=8)
    # Customer.io's recipe: the hex HMAC-SHA256 of "v0:<timestamp>:<body>" with the signing key.
    preset = HMACPreset(
        "X-CIO-Signature", message="v0:{timestamp}:{body}", timestamp_header="X-CIO-Timestamp"
    )

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = None,
    ) -> None:
        super().__init__(secret=secret, name=name, tolerance=tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        kind, metric = payload.get("object_type"), payload.get("metric")
        label = f"{kind}.{metric}" if isinstance(kind, str) and isinstance(metric, str) else None
        return Identity(
            event_id=event_key(payload.get("event_id")),
            event_type=optional_text(label),
            occurred_at=parse_time(payload.get("timestamp")),
            payload=payload,
        )


PROVIDER = declare(
    CustomerIO,
    example=lambda keys: CustomerIO(secret="customerio-example-signing-key"),
    event=lambda tag: {
        "event_id": f"01E4C4CT6YDC7Y5M7FE1{tag}",
        "object_type": "email",
        "metric": "delivered",
        "timestamp": 1_700_000_000,
        "data": {"customer_id": "42", "delivery_id": f"dlv-{tag}", "recipient": "a@b.example"},
    },
)
