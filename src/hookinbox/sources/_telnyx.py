"""Telnyx (API v2 webhooks): Ed25519 over `{telnyx-timestamp}|{body}` (the `crypto` extra).

`telnyx-signature-ed25519` is the base64 signature, checked against the account's public key
(base64, 32 bytes, from the Mission Control portal: Keys & Credentials, Public Key), which
the operator configures: Telnyx serves no key to fetch. `telnyx-timestamp` is Unix seconds,
held within 300 s of now both ways, as Telnyx's SDKs hold it.

The key is the event's `data.id`, the same on every attempt. Telnyx counts the attempts in the
body (`meta.attempt`), so a retry's body differs from the first one's: the source names the
event's `data`, which every attempt repeats, as what tells a retry from a key conflict.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError, PayloadError
from hookinbox.sources._base import Source
from hookinbox.sources._ed25519 import Ed25519Keys, ed25519_signature, stranger_key
from hookinbox.sources._identity import (
    Identity,
    compact_json,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    Headers,
    check_tolerance,
    parse_timestamp,
    require_header,
    signature_items,
)

SIGNATURE = "telnyx-signature-ed25519"
TIMESTAMP = "telnyx-timestamp"


class Telnyx(Source):
    default_name = "telnyx"
    # Telnyx retries a failed webhook on the failover URL and again (schedule not confirmed):
    # a day's margin.
    redelivery_window = timedelta(days=1)
    stored_headers = (SIGNATURE, TIMESTAMP)
    signature_headers = stored_headers

    def __init__(
        self,
        *,
        public_key: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(name=name)
        self.tolerance = tolerance
        raw = []
        for key in secrets_tuple(public_key):
            try:
                raw.append(base64.b64decode(key.strip(), validate=True))
            except (binascii.Error, ValueError) as exc:
                raise ConfigurationError("a Telnyx public key is base64 (32 bytes)") from exc
        self._public = Ed25519Keys(raw, feature="hookinbox.sources.Telnyx")

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        timestamp_text = require_header(headers, TIMESTAMP).strip()
        timestamp = parse_timestamp(timestamp_text)
        signatures = []
        for item in signature_items(headers, SIGNATURE, what="telnyx-signature-ed25519"):
            try:
                signatures.append(base64.b64decode(item, validate=True))
            except ValueError:  # binascii.Error, or text that is not ASCII
                continue
        if not signatures:
            raise BadSignature("telnyx-signature-ed25519 is not base64")
        if not self._public.verifies(signatures, timestamp_text.encode() + b"|" + body):
            raise BadSignature()
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        data = payload.get("data")
        if not isinstance(data, dict):
            raise PayloadError("no data object in the Telnyx delivery")
        return Identity(
            event_id=event_key(data.get("id"), "data.id"),
            event_type=optional_text(data.get("event_type")),
            occurred_at=parse_time(data.get("occurred_at")),
            payload=payload,
            fingerprint=compact_json(data),
        )


def sign(source: Telnyx, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    """Telnyx's recipe: Ed25519 over `{timestamp}|{body}`, base64."""
    message = str(t).encode() + b"|" + body
    signature = ed25519_signature(source, source._public, message, fields)
    return {
        **json_headers(fields),
        "User-Agent": "telnyx-webhooks",
        "telnyx-signature-ed25519": base64.b64encode(signature).decode(),
        "telnyx-timestamp": str(t),
    }


def example_event(tag: str) -> dict[str, Any]:
    return {
        "data": {
            "event_type": "message.finalized",
            "id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"telnyx:{tag}")),
            "occurred_at": "2023-11-14T22:13:20.000+00:00",
            "payload": {"id": "40385f64-5717-4562-b3fc-2c963f66afa6"},
            "record_type": "event",
        },
        "meta": {"attempt": 1, "delivered_to": "https://shop.example/webhooks/telnyx"},
    }


PROVIDER = provider(
    Telnyx,
    sign=sign,
    example=lambda keys: Telnyx(public_key=base64.b64encode(bytes.fromhex(keys.ed25519)).decode()),
    event=example_event,
    signature_header="telnyx-signature-ed25519",
    forgery=lambda: {"private_key": stranger_key()},
)
