"""Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=...]`, HMAC-SHA256 of `{ts}:{body}`.

The key is the body's `event_id` (`evt_...`). Not `notification_id`: Paddle makes one
notification per destination, so two destinations of one account pointing here would store the
event twice. Any `h1` may match; schemes Paddle may add later are ignored, not refused.
The tolerance defaults to 300 s, not the SDK's 5 s (see docs/sources/paddle.md).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox.sources._base import SignatureListSource
from hookinbox.sources._identity import Identity, fields_identity
from hookinbox.sources._provider import hex_mac, json_headers, provider, secret_key
from hookinbox.sources._signatures import Headers


class Paddle(SignatureListSource):
    default_name = "paddle"
    # Live: up to 60 retries over 3 days.
    redelivery_window = timedelta(days=3)
    stored_headers = ("paddle-signature",)
    signature_header = "paddle-signature"
    signature_headers = (signature_header,)
    header_label = "Paddle-Signature"
    separator = ";"
    timestamp_name = "ts"
    signature_name = "h1"
    joiner = b":"

    def identify(self, headers: Headers, body: bytes) -> Identity:
        return fields_identity(
            body,
            id_field="event_id",
            type_field="event_type",
            time_field="occurred_at",
            what="event_id",
        )


def sign(source: Paddle, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    digest = hex_mac(secret_key(source, fields), f"{t}:".encode() + body)
    return {**json_headers(fields), "Paddle-Signature": f"ts={t};h1={digest}"}


PROVIDER = provider(
    Paddle,
    sign=sign,
    example=lambda keys: Paddle(secret="pdl_example"),
    event=lambda tag: {"event_id": f"evt_{tag}", "event_type": "transaction.paid"},
    signature_header="Paddle-Signature",
)
