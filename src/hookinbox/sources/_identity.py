"""What a verified delivery says about its event: the `Identity` a source finds in the body.

Parsing runs only on a body already proven authentic, and turns every way a body can fail
(not plain UTF-8, not JSON, no usable id) into a `PayloadError` (400). The key is bounded and
printable (`event_key`); a type or a time that cannot be read is dropped rather than refused,
since both are informational. A fingerprint names what a redelivery repeats when the body
changes on every attempt, and an event of a batch that names no usable key is kept as
`invalid` rather than lost.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hookinbox._errors import PayloadError
from hookinbox._model import MAX_KEY_LENGTH
from hookinbox._payload import loads
from hookinbox.sources._json_slices import JsonSlice


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
    fingerprint: bytes | None = None
    """The bytes every redelivery of the event repeats, whose digest tells a retry from a key
    conflict (the same key with another body); None compares the stored body. A provider that
    signs inside the body (Mailgun's signature block, Linear's `webhookTimestamp`) changes
    the body on every attempt, so its source names the part that stays the same."""
    answer: dict[str, Any] | None = None
    """The JSON to answer once the event is stored, for a provider that reads the answer
    (Discord's deferred interaction response); None answers hookinbox's own body."""
    invalid: str | None = None
    """Why this event of a batch cannot be processed (it names no usable id): the event is
    stored as `invalid` with this reason, for an operator, and never handed to handlers
    (`BatchSource.identify_items`); None for every usable event."""


UTF8_BOM = b"\xef\xbb\xbf"
"""A byte order mark: RFC 8259 forbids JSON senders to add one, and no provider does."""

_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),  # before UTF-16's mark, which it starts with
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def wide_encoding(body: bytes) -> str | None:
    """The wider encoding the body is in, "UTF-16" or "UTF-32", if it starts as JSON does in
    one of them; None otherwise.

    JSON text starts with an ASCII character, so without a byte order mark the NUL bytes
    among its first four bytes tell UTF-16 and UTF-32 apart, in either byte order (RFC 4627,
    section 3): the rule Python's `json.loads(bytes)` follows to decode them, which is why
    hookinbox must look for itself. No UTF-8 text starts with a NUL byte or with FE or FF.
    """
    for mark, name in _WIDE_MARKS:
        if body.startswith(mark):
            return name
    head = body[:4]
    if len(head) < 2 or (head[0] and head[1]):
        return None
    if len(head) == 4 and not head[0] and not head[1]:
        return "UTF-32"  # 00 00 00 xx
    if len(head) == 4 and not head[1] and not head[2] and not head[3]:
        return "UTF-32"  # xx 00 00 00
    return "UTF-16"


def refuse_other_encodings(body: bytes) -> None:
    """`PayloadError` for an authentic body that is not plain UTF-8: a byte order mark in
    front, or UTF-16 or UTF-32 (RFC 8259 requires UTF-8 between systems). Python would read
    them, but a handler or library that decodes the body as UTF-8 text first (stripe-node,
    the standardwebhooks package before 1.3.0, `json.loads(body.decode())`) cannot, so such
    an event is refused (400), never stored, and never answered as a handshake."""
    if body.startswith(UTF8_BOM):
        raise PayloadError("body starts with a byte order mark (U+FEFF)")
    wide = wide_encoding(body)
    if wide is not None:
        raise PayloadError(f"body is {wide}, not UTF-8 (RFC 8259 requires UTF-8)")


def parse_json(body: bytes) -> Any:
    """Parse the body, turning every way JSON can fail into `PayloadError`."""
    try:
        return loads(body)
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


def fields_identity(
    body: bytes, *, id_field: str, type_field: str, time_field: str, what: str = "event id"
) -> Identity:
    """The identity of a JSON object body whose id, type and time are top-level fields."""
    payload = parse_json_object(body)
    return Identity(
        event_id=event_key(payload.get(id_field), what),
        event_type=optional_text(payload.get(type_field)),
        occurred_at=parse_time(payload.get(time_field)),
        payload=payload,
    )


def canonical_json(value: Any) -> bytes:
    """`value` serialised one way only (sorted keys, no spaces, ASCII), as a fingerprint."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    except (ValueError, RecursionError) as exc:
        raise PayloadError("the body cannot be serialised canonically") from exc
    return text.encode()


def fingerprint_without(payload: dict[str, Any], *names: str) -> bytes:
    """`Identity.fingerprint` of a JSON object whose top-level fields `names` change on every
    attempt (a signature block, a delivery stamp, an attempt counter): the rest, canonical."""
    return canonical_json({name: value for name, value in payload.items() if name not in names})


def compact_json(item: Any) -> bytes:
    """One event of a batch as compact JSON, keys in the order sent: what a redelivery of it
    repeats, whatever the spacing of the batch around it."""
    text = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate escaped in the batch


INVALID_PREFIX = "invalid:"


def invalid_identity(item: JsonSlice, reason: str) -> Identity:
    """An event of a batch that cannot be processed, kept for an operator: stored as the bytes
    sent, with `reason`, keyed by the digest of its JSON (a redelivered batch stores it once,
    however it is formatted, and no provider's key starts with `invalid:`)."""
    digest = hashlib.sha256(compact_json(item.value)).hexdigest()
    return Identity(
        event_id=INVALID_PREFIX + digest,
        event_type=None,
        occurred_at=None,
        payload=item.value,
        body=item.raw,
        invalid=reason,
    )
