"""Twitch EventSub over webhooks: `Twitch-Eventsub-Message-Signature: sha256=<hex>`.

The HMAC-SHA256 (key: the subscription's secret, as typed) covers the message id, the
timestamp and the body, concatenated: `{Twitch-Eventsub-Message-Id}{...-Timestamp}{body}`. The
timestamp is RFC 3339 with nanoseconds; Twitch asks receivers to refuse messages older than
10 minutes, so the tolerance is 600 s (both ways, as everywhere here).

`Twitch-Eventsub-Message-Type` says what the message is:
- `webhook_callback_verification`: answered with the `challenge`, as it stands, in
  `text/plain`, and nothing is stored;
- `notification`: an event, stored under the message id (Twitch keeps it when it resends);
- `revocation`: Twitch ended the subscription (its `subscription.status` says why): stored
  as an event of type `revocation`, so a handler or an operator learns of it.

That header is not signed, so it is never believed alone: the signed body has the shape of
one type (a verification carries a `challenge`, a notification an `event`, a revocation only
its `subscription`), and a header naming another type is refused (400). Otherwise a captured
verification, replayed within the window as a `revocation`, would be stored as one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hookinbox._errors import BadSignature, PayloadError
from hookinbox.sources._base import TimestampedSource
from hookinbox.sources._identity import (
    Identity,
    event_key,
    lookup,
    optional_text,
    parse_json_object,
)
from hookinbox.sources._provider import body_id, hex_mac, iso, json_headers, provider, secret_key
from hookinbox.sources._signatures import (
    Headers,
    check_tolerance,
    decode_digests,
    require_header,
    require_match,
)

VERIFICATION = "webhook_callback_verification"
REVOCATION = "revocation"
NOTIFICATION = "notification"
MESSAGE_TYPE = "twitch-eventsub-message-type"
REPLAY_WINDOW = 600.0
"""Twitch's advice: refuse a message whose timestamp is more than 10 minutes old."""
RFC3339 = re.compile(r"(\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?([Zz]|[+-]\d\d:\d\d)")


def message_type(payload: dict[str, Any]) -> str:
    """The message type the signed body's shape says: what Twitch sends under each type."""
    if "challenge" in payload:
        return VERIFICATION
    if "event" in payload or "events" in payload:
        return NOTIFICATION
    return REVOCATION


def checked_type(headers: Headers, payload: dict[str, Any]) -> str:
    """`message_type` of the body, or `PayloadError` when the header claims another one."""
    shape = message_type(payload)
    claimed = headers.get(MESSAGE_TYPE)
    if claimed is not None and claimed != shape:
        raise PayloadError(
            f"Twitch-Eventsub-Message-Type is {claimed[:64]!r}, but the signed body is a {shape}"
        )
    return shape


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 time with up to nanoseconds (Python reads at most microseconds)."""
    match = RFC3339.fullmatch(text.strip())
    if match is None:
        raise BadSignature("Twitch-Eventsub-Message-Timestamp is not an RFC 3339 time")
    whole, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        parsed = datetime.fromisoformat(f"{whole.replace('t', 'T')}{zone}")
    except ValueError as exc:
        raise BadSignature("Twitch-Eventsub-Message-Timestamp is not a valid time") from exc
    micros = int((fraction or "0").ljust(6, "0")[:6])
    return parsed.replace(microsecond=micros).astimezone(UTC)


class Twitch(TimestampedSource):
    default_name = "twitch"
    # Twitch resends a message it is unsure was received, with the same id, and documents
    # no schedule; a day keeps the key well past any resend.
    redelivery_window = timedelta(days=1)
    stored_headers = (
        "twitch-eventsub-message-id",
        "twitch-eventsub-message-timestamp",
        "twitch-eventsub-message-signature",
        "twitch-eventsub-message-type",
        "twitch-eventsub-message-retry",
        "twitch-eventsub-subscription-type",
        "twitch-eventsub-subscription-version",
    )
    signature_headers = (
        "twitch-eventsub-message-id",
        "twitch-eventsub-message-timestamp",
        "twitch-eventsub-message-signature",
    )

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = REPLAY_WINDOW,
    ) -> None:
        super().__init__(secret=secret, name=name, tolerance=tolerance)

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        candidates = decode_digests(
            headers,
            "twitch-eventsub-message-signature",
            what="Twitch-Eventsub-Message-Signature",
            prefix="sha256=",
        )
        message_id = require_header(headers, "twitch-eventsub-message-id")
        timestamp_text = require_header(headers, "twitch-eventsub-message-timestamp")
        sent = parse_rfc3339(timestamp_text)
        try:
            signed = (message_id + timestamp_text).encode() + body
        except UnicodeEncodeError as exc:  # a lone surrogate: no sender could have signed it
            raise BadSignature("Twitch-Eventsub-Message-Id is not valid text") from exc
        require_match(self._keys, candidates, signed)
        check_tolerance(int(sent.timestamp()), now=now, tolerance=self.tolerance)

    def handshake(self, headers: Headers, body: bytes) -> str | None:
        if headers.get(MESSAGE_TYPE) != VERIFICATION and b'"challenge"' not in body:
            return None  # no verification: `identify` checks the type against the body
        payload = parse_json_object(body)
        if checked_type(headers, payload) != VERIFICATION:
            return None
        challenge = payload.get("challenge")
        if optional_text(challenge, limit=1024) is None:
            raise PayloadError("webhook_callback_verification without a usable challenge")
        assert isinstance(challenge, str)
        return challenge

    def identify(self, headers: Headers, body: bytes) -> Identity:
        payload = parse_json_object(body)
        kind = checked_type(headers, payload)
        if kind == VERIFICATION:  # only `handshake` answers one; never stored
            raise PayloadError("a webhook_callback_verification is answered, never stored")
        if kind == REVOCATION:
            event_type: str | None = REVOCATION
        else:
            event_type = optional_text(lookup(payload, "subscription.type"))
        timestamp = headers.get("twitch-eventsub-message-timestamp", "")
        return Identity(
            event_id=event_key(headers.get("twitch-eventsub-message-id"), "message id"),
            event_type=event_type,
            occurred_at=parse_rfc3339(timestamp) if timestamp else None,
            payload=payload,
        )


def sign(source: Twitch, body: bytes, t: int, fields: dict[str, Any]) -> dict[str, str]:
    key = secret_key(source, fields)
    message_id = fields.pop("message_id", None) or body_id(source, body)
    timestamp = iso(t).replace("Z", ".000000000Z")  # Twitch's nanoseconds
    kind = fields.pop("message_type", None) or _sent_type(body)
    headers = {
        **json_headers(fields),
        "Twitch-Eventsub-Message-Id": message_id,
        "Twitch-Eventsub-Message-Retry": "0",
        "Twitch-Eventsub-Message-Type": kind,
        "Twitch-Eventsub-Message-Signature": "sha256="
        + hex_mac(key, (message_id + timestamp).encode() + body),
        "Twitch-Eventsub-Message-Timestamp": timestamp,
    }
    try:
        subscription = json.loads(body)["subscription"]
        headers["Twitch-Eventsub-Subscription-Type"] = str(subscription["type"])
        headers["Twitch-Eventsub-Subscription-Version"] = str(subscription["version"])
    except (ValueError, KeyError, TypeError):
        pass
    return headers


def _sent_type(body: bytes) -> str:
    """The message type Twitch sends a body of this shape under (the source checks it)."""
    try:
        payload = json.loads(body)
    except ValueError:
        return NOTIFICATION
    return message_type(payload) if isinstance(payload, dict) else NOTIFICATION


PROVIDER = provider(
    Twitch,
    sign=sign,
    example=lambda keys: Twitch(secret="twitch-example"),
    event=lambda tag: {"subscription": {"id": tag, "type": "channel.follow", "version": "2"}},
    signature_header="Twitch-Eventsub-Message-Signature",
)
