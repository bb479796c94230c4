"""Zendesk: `X-Zendesk-Webhook-Signature: <base64>`, HMAC-SHA256 of
`X-Zendesk-Webhook-Signature-Timestamp` followed by the body, with the webhook's signing
secret.

The secret is used as Zendesk shows it (its UTF-8 bytes; it looks like base64 and is not
decoded). The timestamp (ISO 8601, `2021-06-14T20:43:57Z`) is signed and held within
`tolerance`, 300 s both ways by default (Zendesk states no window), once the signature
matches.

The key: an event-subscription webhook's body is an event with its own `id`, which is the
key; a trigger or automation webhook's body is whatever the trigger writes, so its key is the
`X-Zendesk-Webhook-Invocation-Id` header (unsigned; whether a retry repeats it is not
confirmed). The type is the body's `type` (`zen:event-type:ticket.created`), the time `time`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import Identity, event_key, optional_text, parse_json, parse_time
from hookinbox.sources._provider import b64_mac, body_id, iso, json_headers, provider, secret_key
from hookinbox.sources._signatures import (
    Headers,
    check_tolerance,
    decode_digests,
    parse_zoned_time,
    require_header,
    require_match,
)

SIGNATURE = "x-zendesk-webhook-signature"
TIMESTAMP = "x-zendesk-webhook-signature-timestamp"
INVOCATION = "x-zendesk-webhook-invocation-id"


class Zendesk(TimestampedSource):
    default_name = "zendesk"
    # Zendesk's retries are not confirmed; a day keeps a key past any quick retry.
    redelivery_window = timedelta(days=1)
    stored_headers = (SIGNATURE, TIMESTAMP, INVOCATION, "x-zendesk-webhook-id")
    signature_headers = (SIGNATURE, TIMESTAMP)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers, SIGNATURE, what="X-Zendesk-Webhook-Signature", encoding="base64"
        )
        timestamp_text = require_header(headers, TIMESTAMP)
        sent = parse_zoned_time(timestamp_text, "X-Zendesk-Webhook-Signature-Timestamp")
        try:
            signed = timestamp_text.encode() + body
        except UnicodeEncodeError as exc:  # a lone surrogate: no sender could have signed it
            raise BadSignature("X-Zendesk-Webhook-Signature-Timestamp is not valid text") from exc
        require_match(self._keys, candidates, signed)
        check_tolerance(sent.timestamp(), now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json(body)
        fields = payload if isinstance(payload, dict) else {}
        event_id = fields.get("id")
        if event_id is None:
            event_id = headers.get(INVOCATION)
        return Identity(
            event_id=event_key(event_id, f"event id (body id or {INVOCATION} header)"),
            event_type=optional_text(fields.get("type")),
            occurred_at=parse_time(fields.get("time")),
            payload=payload,
        )


def sign(source: Zendesk, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    # Zendesk's recipe: base64(HMAC-SHA256(secret, timestamp + body)).
    timestamp = iso(t)
    signature = b64_mac(secret_key(source, fields), timestamp.encode() + body)
    return {
        **json_headers(fields),
        "X-Zendesk-Webhook-Id": "01HEXAMPLEWEBHOOK",
        "X-Zendesk-Webhook-Invocation-Id": fields.pop("event_id", None) or body_id(source, body),
        "X-Zendesk-Webhook-Signature-Timestamp": timestamp,
        "X-Zendesk-Webhook-Signature": signature,
    }


PROVIDER = provider(
    Zendesk,
    sign=sign,
    example=lambda keys: Zendesk(secret="zendesk-example"),
    event=lambda tag: {
        "type": "zen:event-type:ticket.created",
        "id": f"cbe4028c-{tag}",
        "time": "2023-11-14T22:13:20Z",
        "zendesk_event_version": "2022-11-06",
        "subject": f"zen:ticket:{tag}",
        "detail": {"id": tag},
        "account_id": 12514403,
    },
    signature_header="X-Zendesk-Webhook-Signature",
)
