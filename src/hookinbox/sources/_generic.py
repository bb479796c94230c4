"""A configurable HMAC source for providers without a module of their own.

It covers the common shape: an HMAC of the raw body (optionally preceded by a signed timestamp
header, as `{timestamp}.{body}`), hex or base64, optionally behind a prefix such as `sha256=`;
the key and type read from a header or from a dotted path in the JSON body.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Literal

from hookinbox._errors import ConfigurationError
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json,
    parse_time,
)
from hookinbox.sources._provider import body_id, json_headers, mac, provider, secret_key
from hookinbox.sources._secrets import utf8_keys
from hookinbox.sources._signatures import (
    Headers,
    decode_digests,
    require_header,
    require_match,
    verify_timestamped,
)


class HMACSource(Source):
    """A source for any provider that signs with an HMAC; every location is configurable."""

    default_name = "hmac"

    def __init__(
        self,
        *,
        name: str,
        secret: str | Sequence[str],
        signature_header: str,
        algorithm: str = "sha256",
        encoding: Literal["hex", "base64"] = "hex",
        signature_prefix: str = "",
        timestamp_header: str | None = None,
        tolerance: float | None = 300.0,
        id_header: str | None = None,
        id_field: str = "id",
        type_header: str | None = None,
        type_field: str | None = "type",
        time_field: str | None = None,
        redelivery_window: timedelta = timedelta(days=3),
    ) -> None:
        super().__init__(name=name)
        self.redelivery_window = redelivery_window
        if algorithm not in hashlib.algorithms_guaranteed or algorithm.startswith("shake"):
            raise ConfigurationError(f"unknown HMAC algorithm {algorithm!r}")
        if encoding not in ("hex", "base64"):
            raise ConfigurationError("encoding must be 'hex' or 'base64'")
        self._keys = utf8_keys(secret)
        self.signature_header = signature_header.lower()
        self.algorithm = algorithm
        self.encoding = encoding
        self.signature_prefix = signature_prefix
        self.timestamp_header = timestamp_header.lower() if timestamp_header else None
        self.tolerance = tolerance
        self.id_header = id_header.lower() if id_header else None
        self.id_field = id_field
        self.type_header = type_header.lower() if type_header else None
        self.type_field = type_field
        self.time_field = time_field
        configured = (
            self.signature_header,
            self.timestamp_header,
            self.id_header,
            self.type_header,
        )
        self.stored_headers = tuple(h for h in configured if h)
        self.signature_headers = tuple(h for h in configured[:2] if h)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers,
            self.signature_header,
            what=self.signature_header,
            encoding=self.encoding,
            prefix=self.signature_prefix,
        )
        if self.timestamp_header is None:
            require_match(self._keys, candidates, body, algorithm=self.algorithm)
            return
        verify_timestamped(
            self._keys,
            candidates,
            require_header(headers, self.timestamp_header),
            body,
            now=now,
            tolerance=self.tolerance,
            algorithm=self.algorithm,
        )

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json(body)
        raw_id = headers.get(self.id_header) if self.id_header else lookup(payload, self.id_field)
        if self.type_header:
            event_type = optional_text(headers.get(self.type_header))
        else:
            event_type = (
                optional_text(lookup(payload, self.type_field)) if self.type_field else None
            )
        return Identity(
            event_id=event_key(raw_id),
            event_type=event_type,
            occurred_at=parse_time(lookup(payload, self.time_field)) if self.time_field else None,
            payload=payload,
        )


def sign(source: HMACSource, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    signed = f"{t}.".encode() + body if source.timestamp_header else body
    digest = mac(key, signed, source.algorithm)
    encoded = digest.hex() if source.encoding == "hex" else base64.b64encode(digest).decode()
    headers = {**json_headers(fields), source.signature_header: source.signature_prefix + encoded}
    if source.timestamp_header:
        headers[source.timestamp_header] = str(t)
    if source.id_header:
        headers[source.id_header] = fields.pop("event_id", None) or body_id(source, body)
    if source.type_header:
        headers[source.type_header] = fields.pop("event_type", "event")
    return headers


PROVIDER = provider(
    HMACSource,
    sign=sign,
    # As docs/sources/hmac.md configures it for Mollie.
    example=lambda keys: HMACSource(
        name="mollie-hmac",
        secret="mollie-example",
        signature_header="X-Mollie-Signature",
        signature_prefix="sha256=",
        time_field="createdAt",
    ),
    event=lambda tag: {"id": f"evt_{tag}", "type": "order.paid", "created": 1_700_000_000},
    signature_header="X-Mollie-Signature",
)
