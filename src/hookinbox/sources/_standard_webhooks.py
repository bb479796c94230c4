"""Standard Webhooks (Svix and other senders).

Headers `webhook-id`, `webhook-timestamp`, `webhook-signature` (Svix sends `svix-*` twins);
the signature header is a space-separated list of `v1,<base64>` entries; HMAC-SHA256 over
`{id}.{timestamp}.{body}`, keyed with the base64-decoded part of a `whsec_...` secret.
`v1a,<base64>` entries are Ed25519 signatures of the same bytes, checked against a configured
`whpk_<base64>` public key (the `crypto` extra). A source given both a secret and a public key
accepts either (a sender moving from `v1` to `v1a` signs with both for a while).
The key is `webhook-id`; the type is the payload's `type`.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources._base import Source, TimestampedSource
from hookinbox.sources._ed25519 import Ed25519Keys, ed25519_signature
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import (
    HOUR,
    MINUTE,
    Simulation,
    b64_mac,
    body_id,
    json_headers,
    provider,
    secret_key,
)
from hookinbox.sources._secrets import secrets_tuple
from hookinbox.sources._signatures import (
    DEFAULT_TOLERANCE,
    Headers,
    check_signature_count,
    check_tolerance,
    header_values,
    parse_timestamp,
    require_header,
    require_match,
)

SECRET_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
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


def decode_public_key(public_key: str) -> bytes:
    """The Ed25519 key of a `whpk_<base64>` public key (the prefix is optional)."""
    encoded = public_key.strip().removeprefix(PUBLIC_KEY_PREFIX)
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError("a Standard Webhooks public key must be whpk_<base64>") from exc


def decode_signatures(*values: str, version: str = "v1") -> list[bytes]:
    """The `version` signatures of the `webhook-signature` header's values; malformed entries
    are skipped.

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
        if parts[i] != version or i + 1 >= len(parts) or VERSION.fullmatch(parts[i + 1]):
            continue
        try:
            signatures.append(base64.b64decode(parts[i + 1], validate=True))
        except (binascii.Error, ValueError):
            continue
    return signatures


class StandardWebhooks(TimestampedSource):
    """`v1` signatures with a `whsec_` secret, `v1a` with a `whpk_` public key, or both."""

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

    def __init__(
        self,
        *,
        secret: str | Sequence[str] | None = None,
        public_key: str | Sequence[str] | None = None,
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        if secret is None and public_key is None:
            raise ConfigurationError(
                f"{type(self).__name__} needs a secret (v1), a public_key (v1a), or both"
            )
        Source.__init__(self, name=name)
        self.tolerance = tolerance
        self._keys = [] if secret is None else [self.decode_key(s) for s in secrets_tuple(secret)]
        self._public: Ed25519Keys | None = None
        if public_key is not None:
            raw = [decode_public_key(k) for k in secrets_tuple(public_key)]
            self._public = Ed25519Keys(raw, feature=f"{type(self).__name__}(public_key=...)")

    @staticmethod
    def decode_key(secret: str) -> bytes:
        return decode_secret(secret)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        message_id = require_header(headers, "webhook-id", "svix-id")
        timestamp_text = require_header(headers, "webhook-timestamp", "svix-timestamp")
        values = header_values(headers, "webhook-signature", "svix-signature")
        symmetric = decode_signatures(*values) if self._keys else []
        asymmetric = decode_signatures(*values, version="v1a") if self._public else []
        if not symmetric and not asymmetric:
            wanted = " or ".join(v for v, on in (("v1", self._keys), ("v1a", self._public)) if on)
            raise BadSignature(f"webhook-signature has no {wanted} signature")
        timestamp = parse_timestamp(timestamp_text)
        try:
            signed = f"{message_id}.{timestamp_text.strip()}.".encode() + body
        except UnicodeEncodeError as exc:  # a lone surrogate: no sender could have signed it
            raise BadSignature("webhook-id is not valid text") from exc
        if not (self._public is not None and self._public.verifies(asymmetric, signed)):
            if not symmetric:
                raise BadSignature()
            require_match(self._keys, symmetric, signed)
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


EXAMPLE_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
"""The Standard Webhooks specification's example secret."""


def standard_headers(
    source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any], prefix: str = "webhook"
) -> dict[str, str]:
    """The signed headers under `prefix` (`webhook`, or Svix's `svix`): one signature entry
    per scheme the source trusts, space-separated: `v1` with its secret, `v1a` with its
    public key's private half (a sender moving to v1a signs with both)."""
    message_id = fields.pop("message_id", None) or body_id(source, body, "msg_")
    signed = f"{message_id}.{t}.".encode() + body
    signatures = []
    if source._keys or "secret" in fields:
        signatures.append("v1," + b64_mac(secret_key(source, fields), signed))
    if source._public is not None or "private_key" in fields:
        signature = ed25519_signature(source, source._public, signed, fields)
        signatures.append("v1a," + base64.b64encode(signature).decode())
    return {
        **json_headers(fields),
        f"{prefix}-id": message_id,
        f"{prefix}-timestamp": str(t),
        f"{prefix}-signature": " ".join(signatures),
    }


def sign(source: StandardWebhooks, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return standard_headers(source, body, t, fields)


def example_event(tag: str) -> dict[str, Any]:
    return {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000}


PROVIDER = provider(
    StandardWebhooks,
    sign=sign,
    example=lambda keys: StandardWebhooks(secret=EXAMPLE_SECRET),
    event=example_event,
    signature_header="webhook-signature",
    forgery=lambda: {"secret": "whsec_" + base64.b64encode(b"another key").decode()},
    # Svix: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; 15 s to answer.
    simulation=Simulation(
        retry_delays=(5, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR),
        ack_timeout=15.0,
        signs_timestamp=True,
        signature_headers=frozenset({"webhook-timestamp", "webhook-signature"}),
    ),
)
