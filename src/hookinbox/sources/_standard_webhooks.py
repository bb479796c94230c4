"""Standard Webhooks (Svix and other senders).

Headers `webhook-id`, `webhook-timestamp`, `webhook-signature` (Svix sends `svix-*` twins);
the signature header is a space-separated list of `v1,<base64>` entries; HMAC-SHA256 over
`{id}.{timestamp}.{body}`, keyed with the base64-decoded part of a `whsec_...` secret.
`v1a` (ed25519) entries are not checked: a delivery signed only with them is rejected.
The key is `webhook-id`; the type is the payload's `type`.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import timedelta

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources._base import (
    Headers,
    Identity,
    TimestampedSource,
    check_signature_count,
    check_tolerance,
    event_key,
    header_values,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
    parse_timestamp,
    require_header,
    require_match,
)

SECRET_PREFIX = "whsec_"
VERSION = re.compile(r"v[0-9]+[a-z]*")
"""A signature's version label (`v1`, `v1a`): the token before the signature itself."""


def decode_secret(secret: str) -> bytes:
    """The HMAC key of a `whsec_<base64>` secret (the prefix is optional, as in the spec)."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError("a Standard Webhooks secret must be whsec_<base64>") from exc
    if not key:
        raise ConfigurationError("a Standard Webhooks secret must not be empty")
    return key


def decode_signatures(*values: str) -> list[bytes]:
    """The `v1` signatures of the `webhook-signature` header's values; malformed entries are
    skipped.

    Entries are `<version>,<base64>`, separated by spaces. A header repeated reaches here as
    several values, or as one a WSGI server joined with commas (`v1,a,v1,b`): the text is
    read as a stream of parts, each version label taking the token after it (base64 holds
    neither a comma nor a space).
    """
    parts = [t for value in values for t in re.split(r"[\s,]+", value) if t]
    labels = [i for i, t in enumerate(parts) if VERSION.fullmatch(t)]
    check_signature_count(max(len(labels), len(parts) // 2), "webhook-signature")
    signatures = []
    for i in labels:
        if parts[i] != "v1" or i + 1 >= len(parts) or VERSION.fullmatch(parts[i + 1]):
            continue
        try:
            signatures.append(base64.b64decode(parts[i + 1], validate=True))
        except (binascii.Error, ValueError):
            continue
    return signatures


class StandardWebhooks(TimestampedSource):
    default_name = "standard"
    # Svix retries for about 28 h; the spec's example schedule spans about 75 h.
    redelivery_window = timedelta(days=4)
    stored_headers: tuple[str, ...] = (
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "svix-id",
        "svix-timestamp",
        "svix-signature",
    )
    signature_headers = stored_headers  # the id and the timestamp are signed with the body

    @staticmethod
    def decode_key(secret: str) -> bytes:
        return decode_secret(secret)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        message_id = require_header(headers, "webhook-id", "svix-id")
        timestamp_text = require_header(headers, "webhook-timestamp", "svix-timestamp")
        candidates = decode_signatures(
            *header_values(headers, "webhook-signature", "svix-signature")
        )
        if not candidates:
            raise BadSignature("webhook-signature has no v1 signature")
        timestamp = parse_timestamp(timestamp_text)
        try:
            signed = f"{message_id}.{timestamp_text.strip()}.".encode() + body
        except UnicodeEncodeError as exc:  # a lone surrogate: no sender could have signed it
            raise BadSignature("webhook-id is not valid text") from exc
        require_match(self._keys, candidates, signed)
        check_tolerance(timestamp, now=now, tolerance=self.tolerance)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        message_id = headers.get("webhook-id") or headers.get("svix-id")
        occurred = parse_time(payload.get("timestamp")) or parse_time(
            lookup(payload, "data.created_at")
        )
        return Identity(
            event_id=event_key(message_id, "webhook-id"),
            event_type=optional_text(payload.get("type")),
            occurred_at=occurred,
            payload=payload,
        )
