"""Postmark: no signature. HTTP basic credentials in the webhook URL are the only proof.

Postmark signs nothing: its documentation protects a webhook with basic authentication (the
user name and password written into the URL it calls, `https://user:pass@host/...`, which
arrive as `Authorization: Basic ...`) and with a firewall that admits only Postmark's IP
addresses. This source checks the credentials, in constant time (as SHA-256 digests, like
GitLab's token), and never stores the header. It is a shared password, not a signature:
whoever sees one request can send any body; nothing binds the credentials to the body, and
nothing dates the request. The IP allow-list belongs in the firewall or proxy, which sees the
client's address; a source sees headers and bytes only.

Postmark's bodies have no event id; the key is built per `RecordType` from the fields that
tell one record of a message from another (docs/sources/postmark.md): a bounce and a spam
complaint have an `ID`; a delivery is one per recipient; opens and clicks repeat, told apart
by their time (and link). An inbound message (no `RecordType`) is keyed by its `MessageID`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from hookinbox._errors import BadSignature, ConfigurationError
from hookinbox.sources._base import Source
from hookinbox.sources._identity import (
    Identity,
    canonical_json,
    event_key,
    optional_text,
    parse_json_object,
    parse_time,
)
from hookinbox.sources._provider import json_headers, provider
from hookinbox.sources._secrets import secrets_tuple, utf8_key
from hookinbox.sources._signatures import Headers, matches_any, signature_items

RECORD_KEYS: dict[str, tuple[str, ...]] = {
    "Bounce": ("ID",),
    "SpamComplaint": ("ID",),
    "Delivery": ("MessageID", "Recipient"),
    "Open": ("MessageID", "Recipient", "ReceivedAt"),
    "Click": ("MessageID", "Recipient", "ReceivedAt", "OriginalLink"),
    "SubscriptionChange": ("MessageID", "Recipient", "ChangedAt"),
}
"""The fields that name one record of each type: the first is kept as it stands in the key,
the others are folded into a digest (a link or an address can be long, and is not a label)."""
INBOUND = "Inbound"
TIME_FIELDS = ("DeliveredAt", "BouncedAt", "ReceivedAt", "ChangedAt", "Date")


def _digest(values: Sequence[Any]) -> str:
    return hashlib.sha256(canonical_json(list(values))).hexdigest()[:32]


class BasicAuthSource(Source):
    """A provider that signs nothing and sends the HTTP basic credentials written into the
    webhook URL (Postmark, Chargebee): checked in constant time, never stored."""

    stored_headers = ()  # never `Authorization`: it holds the password
    signature_headers = ("authorization",)

    def __init__(
        self, *, username: str, password: str | Sequence[str], name: str | None = None
    ) -> None:
        super().__init__(name=name)
        if not isinstance(username, str) or not username.strip() or ":" in username:
            raise ConfigurationError(
                f"a {type(self).__name__} user name is a non-empty string without ':'"
            )
        self.username = username
        self._passwords = secrets_tuple(password)  # for hookinbox.testing's signer
        self._digests = [
            hashlib.sha256(utf8_key(f"{username}:{secret}")).digest() for secret in self._passwords
        ]

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        # Each value, split at commas as a WSGI server joins them (base64 holds none).
        found = basic = False
        for item in signature_items(headers, "authorization", what="Authorization"):
            scheme, _, encoded = item.partition(" ")
            if scheme.lower() != "basic":
                continue
            try:
                credentials = base64.b64decode(encoded.strip(), validate=True)
            except (binascii.Error, ValueError):
                continue
            basic = True
            found |= matches_any(hashlib.sha256(credentials).digest(), self._digests)
        if not basic:
            raise BadSignature("Authorization holds no HTTP basic credentials")
        if not found:
            raise BadSignature("Authorization does not match the configured credentials")


def sign_basic(
    source: BasicAuthSource, body: bytes, t: int, fields: dict[str, Any]
) -> dict[str, str]:
    """The credentials as the provider sends them: `Authorization: Basic <user:password>`."""
    username = fields.pop("username", source.username)
    password = fields.pop("secret", None) or source._passwords[0]
    credentials = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {**json_headers(fields), "Authorization": f"Basic {credentials}"}


class Postmark(BasicAuthSource):
    """Postmark's webhooks, authenticated by the basic credentials of the URL it calls."""

    default_name = "postmark"
    # Inbound posts are retried 10 times over about 10.5 hours and can be retried by hand
    # later; the other webhooks' schedule is not confirmed. A week covers both.
    redelivery_window = timedelta(days=7)

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        record_type = payload.get("RecordType")
        fields: tuple[str, ...]
        if record_type is None:
            kind, fields = INBOUND, ("MessageID",)
        else:
            kind = event_key(record_type, "RecordType")
            fields = RECORD_KEYS.get(kind, ("MessageID",))
        first = event_key(payload.get(fields[0]), fields[0])
        rest = [payload.get(field) for field in fields[1:]]
        if kind not in RECORD_KEYS and kind != INBOUND:
            rest = [payload]  # a record type added later: its whole content tells it apart
        key = f"{kind}:{first}" + (f":{_digest(rest)}" if rest else "")
        occurred = next(
            (t for t in (parse_time(payload.get(f)) for f in TIME_FIELDS) if t is not None), None
        )
        return Identity(
            event_id=event_key(key),
            event_type=optional_text(kind),
            occurred_at=occurred,
            payload=payload,
        )


def sign(source: Postmark, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    return {**sign_basic(source, body, t, fields), "User-Agent": "Postmark"}


PROVIDER = provider(
    Postmark,
    sign=sign,
    example=lambda keys: Postmark(username="postmark", password="postmark-example"),
    event=lambda tag: {"RecordType": "Bounce", "ID": tag, "MessageID": tag},
    signature_header="Authorization",
)
