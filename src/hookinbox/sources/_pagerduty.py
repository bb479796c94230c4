"""PagerDuty (v3 webhooks): `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>...]`, HMAC-SHA256 of
the body, one signature per signing secret of the subscription.

PagerDuty lists several signatures while a subscription's secret is rotated, and a delivery
is authentic when any `v1` one matches (PagerDuty's own recipe); entries of another version
are skipped. The cap of `MAX_SIGNATURES` entries per header holds, as for every list of
signatures, and the HMAC is computed once per configured secret however many are listed.

The key is the body's `event.id`, the unique id of the outbound event (a retry repeats the
body); the type is `event.event_type` (`incident.triggered`), the time `event.occurred_at`.
PagerDuty signs no timestamp.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SecretSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers, check_prefixed_hex_hmac


class PagerDuty(SecretSource):
    default_name = "pagerduty"
    # Up to 4 retries over about 20 minutes (PagerDuty's webhook behaviour page); a day is
    # ample.
    redelivery_window = timedelta(days=1)
    stored_headers = ("x-pagerduty-signature", "x-webhook-id", "x-webhook-subscription")
    signature_headers = ("x-pagerduty-signature",)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        check_prefixed_hex_hmac(
            headers, body, self._keys, prefix="v1=", name="X-PagerDuty-Signature"
        )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(lookup(payload, "event.id"), "event.id"),
            event_type=optional_text(lookup(payload, "event.event_type")),
            occurred_at=parse_time(lookup(payload, "event.occurred_at")),
            payload=payload,
        )


def sign(source: PagerDuty, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # PagerDuty's recipe: `v1=` and the hex HMAC-SHA256 of the raw body, one per secret.
    signature = hex_mac(secret_key(source, fields), body)
    return {**json_headers(fields), "X-PagerDuty-Signature": f"v1={signature}"}


PROVIDER = provider(
    PagerDuty,
    sign=sign,
    example=lambda keys: PagerDuty(secret="pagerduty-example"),
    event=lambda tag: {
        "event": {
            "id": f"01{tag}",
            "event_type": "incident.triggered",
            "resource_type": "incident",
            "occurred_at": "2023-11-14T22:13:20.000Z",
            "data": {"id": f"P{tag}", "type": "incident"},
        }
    },
    signature_header="X-PagerDuty-Signature",
)
