"""Mailgun: the signature is in the JSON body, and covers a timestamp and a token only.

`signature.signature` is the hex HMAC-SHA256, under the webhook signing key, of
`signature.timestamp` followed by `signature.token` (no separator); a subaccount's event may
also carry `parent-signature`, the same under the parent account's key, and either may match.
The body is parsed to find the signature before anything is verified; that is the provider's
design, and every parse failure is a refusal (401). The timestamp is held within `tolerance`.

What the signature does not cover: `event-data`. A signature block seen once can be attached to
another event within the tolerance; Mailgun's advice is to refuse a token seen before, which
needs state a source does not keep (docs/sources/mailgun.md says what to do). The key is
`event-data.id`, the type `event-data.event`, the time `event-data.timestamp`.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    fingerprint_without,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import hex_mac, json_headers, json_object, provider, secret_key
from hookinbox.sources._signatures import (
    MAX_SIGNATURE_HEADER,
    Headers,
    check_tolerance,
    parse_timestamp,
    require_match,
)

SIGNATURE_FIELDS = ("signature", "parent-signature")


def _signature_block(body: bytes) -> dict[str, Any]:
    try:
        payload = parse_json_object(body)
    except PayloadError as exc:
        raise BadSignature("the body is not a JSON object holding a signature") from exc
    block = payload.get("signature")
    if not isinstance(block, dict):
        raise BadSignature("the body has no signature object")
    return block


def _field(block: dict[str, Any], name: str) -> str:
    value = block.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # Mailgun documents the timestamp as a number, and sends a string
    if not isinstance(value, str) or not value:
        raise BadSignature(f"signature.{name} is missing")
    if len(value) > MAX_SIGNATURE_HEADER or not value.isascii():
        raise BadSignature(f"signature.{name} is too long or not ASCII")
    return value


class Mailgun(TimestampedSource):
    default_name = "mailgun"
    # Retries over 8 hours (not for `delivered` events); a 406 answer stops them.
    redelivery_window = timedelta(days=1)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        block = _signature_block(body)
        timestamp_text = _field(block, "timestamp")
        token = _field(block, "token")
        candidates = []
        for name in SIGNATURE_FIELDS:
            if name not in block:
                continue
            try:
                candidates.append(bytes.fromhex(_field(block, name)))
            except (BadSignature, ValueError):
                continue  # a malformed one is skipped: the other may match
        if not candidates:
            raise BadSignature("signature.signature is missing or not hex")
        timestamp = parse_timestamp(timestamp_text)
        require_match(self._keys, candidates, (timestamp_text + token).encode())
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        return Identity(
            event_id=event_key(lookup(payload, "event-data.id"), "event-data.id"),
            event_type=optional_text(lookup(payload, "event-data.event")),
            occurred_at=parse_time(lookup(payload, "event-data.timestamp")),
            payload=payload,
            # Each attempt carries a new signature block: a retry differs only there.
            fingerprint=fingerprint_without(payload, "signature"),
        )


def sign(
    source: Mailgun, body: bytes, t: int, fields: dict[str, Any]
) -> tuple[dict[str, str], bytes]:
    payload = json_object(body)
    if payload is None:
        raise TypeError("Mailgun signs inside a JSON object body: pass a mapping")
    token = fields.pop("token", None) or secrets.token_hex(25)  # 50 characters, new each time
    digest = hex_mac(secret_key(source, fields), f"{t}{token}".encode())
    block = {"timestamp": str(t), "token": token, "signature": digest}
    sent = json.dumps({**payload, "signature": block}).encode()
    return json_headers(fields), sent


PROVIDER = provider(
    Mailgun,
    sign=sign,
    example=lambda keys: Mailgun(secret="mailgun-example"),
    event=lambda tag: {"event-data": {"id": tag, "event": "delivered"}},
    signature_header=None,
    signed_in_body=True,
)
