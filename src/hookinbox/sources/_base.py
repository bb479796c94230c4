"""What every source is: a pure function of (headers, raw body, secrets, clock).

A source knows where a provider puts its signature, how the signature is built, and where the
event's idempotency key, type and time live. It knows nothing of storage or HTTP.

Two steps, always in this order:
1. `verify(headers, body, now=...)` on the exact raw bytes, before anything is decoded or written;
2. `identify(headers, body)`, which parses the body and finds the key, the type and the time.

Every malformed input becomes a `VerificationError` (step 1) or a `PayloadError` (step 2);
nothing else escapes, which the property tests hold.
"""

from __future__ import annotations

import hmac
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
)

Headers = Mapping[str, str]
"""Request headers with lower-case names (see `normalize_headers`)."""

MAX_KEY_LENGTH = 255


@dataclass(frozen=True, slots=True)
class Identity:
    """What a verified delivery says about its event."""

    event_id: str
    event_type: str | None
    occurred_at: datetime | None
    payload: Any
    body: bytes | None = None
    """What to store instead of the delivery's body; None stores the body as received.
    A fetch-to-verify source (Mollie classic) stores the resource it fetched: the call
    itself carries only an id, and the fetched resource is what handlers need."""


def normalize_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Lower-case header names; repeated headers are joined with ", " as HTTP allows."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    result: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        result[key] = f"{result[key]}, {value}" if key in result else value
    return result


def secrets_tuple(secret: str | Sequence[str]) -> tuple[str, ...]:
    """Accept one secret or several (rotation: the old and the new one both verify)."""
    secrets = (secret,) if isinstance(secret, str) else tuple(secret)
    if not secrets or any(not isinstance(s, str) or not s for s in secrets):
        raise ConfigurationError("a source needs at least one non-empty secret")
    return secrets


def require_header(headers: Headers, *names: str) -> str:
    """The first of `names` present and non-empty, or `MissingHeader`."""
    for name in names:
        value = headers.get(name)
        if value:
            return value
    raise MissingHeader(f"missing header {names[0]}")


def hmac_digest(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, algorithm).digest()


def matches_any(expected: bytes, candidates: Iterable[bytes]) -> bool:
    """Constant-time comparison against every candidate (no early exit on a match)."""
    found = False
    for candidate in candidates:
        found |= hmac.compare_digest(expected, candidate)
    return found


def check_prefixed_hex_hmac(
    header: str, body: bytes, keys: Sequence[bytes], *, prefix: str, name: str
) -> None:
    """`header` is `prefix` + the hex HMAC-SHA256 of `body` under one of `keys` (GitHub, Mollie).

    Raises `BadSignature` naming the header `name` when the shape is wrong or nothing matches.
    """
    header = header.strip()
    if not header.startswith(prefix):
        raise BadSignature(f"{name} does not start with {prefix}")
    try:
        candidate = bytes.fromhex(header[len(prefix) :])
    except ValueError as exc:
        raise BadSignature(f"{name} is not hex") from exc
    if not any([matches_any(hmac_digest(key, body), [candidate]) for key in keys]):
        raise BadSignature()


def parse_json(body: bytes) -> Any:
    """Parse the body, turning every way JSON can fail into `PayloadError`."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise PayloadError("body is not valid JSON") from exc


def parse_json_object(body: bytes) -> dict[str, Any]:
    payload = parse_json(body)
    if not isinstance(payload, dict):
        raise PayloadError("body is not a JSON object")
    return payload


def event_key(value: object, what: str = "event id") -> str:
    """A usable idempotency key: a non-empty string (or integer) of bounded length."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PayloadError(f"no {what} in the delivery")
    key = str(value)
    if not key or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise PayloadError(f"{what} is empty, too long or not printable")
    return key


def optional_text(value: object, limit: int = MAX_KEY_LENGTH) -> str | None:
    """A type or similar label: a bounded string, or None when absent or unusable."""
    if isinstance(value, str) and value and len(value) <= limit and value.isprintable():
        return value
    return None


def lookup(payload: Any, path: str) -> Any:
    """Follow a dotted path (`data.object.id`) into parsed JSON; None where it does not lead."""
    node = payload
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def parse_time(value: object) -> datetime | None:
    """A Unix timestamp (seconds) or an ISO 8601 string as an aware UTC datetime, else None.

    Event times are informational, so an unreadable one is dropped rather than rejected.
    """
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
        if isinstance(value, str) and value:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None


class Source(ABC):
    """A webhook provider's verification and identification rules, configured with secrets."""

    default_name: ClassVar[str]
    redelivery_window: timedelta = timedelta(days=3)
    """How long the provider may send an event again (automatic retries or a manual resend).
    The retention must be longer, or a pruned key could no longer deduplicate a redelivery."""
    stored_headers: tuple[str, ...] = ()
    """Header names (lower case) kept with the event to re-verify and audit it. Never secrets."""
    verifies_over_network: ClassVar[bool] = False
    """True when verifying may call the provider (a certificate, an API): the ASGI app then
    verifies in a worker thread instead of on its event loop."""

    def __init__(self, *, name: str | None = None) -> None:
        self.name = self.default_name if name is None else name
        if not self.name or "/" in self.name or len(self.name) > 64:
            raise ConfigurationError(f"invalid source name {self.name!r}")

    @abstractmethod
    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        """Raise a `VerificationError` unless the delivery is authentic and fresh."""

    @abstractmethod
    def identify(self, headers: Headers, body: bytes) -> Identity:
        """Parse a verified delivery; raise `PayloadError` if it names no event."""

    def authenticate(self, headers: Headers, body: bytes, *, now: float) -> Identity:
        """Verify, then identify: the body is not decoded before it is proven authentic."""
        self.verify(headers, body, now=now)
        return self.identify(headers, body)

    def headers_to_store(self, headers: Headers) -> dict[str, str]:
        kept = ("content-type", "user-agent", *self.stored_headers)
        return {name: headers[name] for name in kept if name in headers}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def parse_timestamp(raw: str) -> int:
    """A signed Unix timestamp in seconds; anything else is a malformed signature."""
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 12:
        raise BadSignature("malformed signature timestamp")
    return int(raw)


def check_tolerance(timestamp: int, *, now: float, tolerance: float | None) -> None:
    """Hold a verified timestamp within `tolerance` seconds of `now`, both ways.

    The window is symmetric: a timestamp far in the future is as suspect as an old one
    (Standard Webhooks rejects both; Stripe's SDK only the old, we are stricter and say so).
    """
    if tolerance is not None and abs(now - timestamp) > tolerance:
        skew = now - timestamp
        when = f"{skew:.0f} s old" if skew > 0 else f"{-skew:.0f} s in the future"
        raise TimestampOutOfTolerance(
            f"signature timestamp is {when} (tolerance {tolerance:.0f} s)"
        )
