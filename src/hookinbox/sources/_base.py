"""What every source is: a pure function of (headers, raw body, secrets, clock).

A source knows where a provider puts its signature, how the signature is built, and where the
event's idempotency key, type and time live. It knows nothing of storage or HTTP.

Two steps, always in this order:
1. `verify(headers, body, now=...)` on the exact raw bytes, before anything is decoded or written;
2. `identify(headers, body)`, which parses the body and finds the key, the type and the time.
Between them, `handshake(headers, body)` lets a provider's verified non-event (Slack's URL
check, Discord's PING, Zoom's and Twitch's challenges) be answered at once, in JSON or text,
with nothing stored; by default there is none. Handshakes outside a signed POST have hooks of
their own (docs/sources/README.md, "Handshakes"): `answer_get(query, headers)` for a GET or
HEAD on the source's path (Meta's `hub.challenge`, Dropbox's `challenge`, X's CRC, Okta's
verification, Trello's HEAD), and `check_query(query, headers, body)` for a POST whose query
string counts (Microsoft Graph's `validationToken`, Event Grid's key), called only for a
source that sets `reads_query`.

Every malformed input becomes a `VerificationError` (step 1) or a `PayloadError` (step 2 and the
handshake); nothing else escapes, which the property tests hold.

The helpers below hold what providers share (a digest behind a prefix, a header listing a
timestamp and signatures, an HMAC over `{timestamp}{separator}{body}`), and the base classes
hold their configuration (secrets, tolerance), so a provider module says only where its
headers, key, type and time are.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar
from urllib.parse import parse_qs

from hookinbox._errors import (
    BadSignature,
    ConfigurationError,
    Handshake,
    MissingHeader,
    PayloadError,
    TimestampOutOfTolerance,
    VerificationError,
)
from hookinbox._headers import HeaderValues
from hookinbox._headers import normalize_headers as normalize_headers  # bench/'s import
from hookinbox._model import MAX_KEY_LENGTH
from hookinbox.sources._json_slices import JsonSlice

if TYPE_CHECKING:
    from hookinbox.sources._provider_api import Listing

_Signature = TypeVar("_Signature", bytes, str)

Headers = Mapping[str, str]
"""Request headers with lower-case names, as every entry point hands them over
(`hookinbox._headers.normalize_headers`)."""

HandshakeAnswer = dict[str, Any] | str | Handshake
"""What `Source.handshake` may answer: JSON, text, or a `Handshake` with its own content type
or status."""

Query = Mapping[str, Sequence[str]]
"""A request's query string, parsed: every value of each name, in order (`parse_query`)."""

MAX_QUERY = 4096
"""The longest query string a handshake reads, in characters; a longer one is refused (400)
before it is parsed. Real ones are under 300 (Meta's three `hub.` fields, Graph's token)."""

MAX_QUERY_FIELDS = 32
"""The most fields a query string may hold; more is refused (400)."""

MAX_CHALLENGE = 512
"""The longest challenge a handshake echoes or signs, in characters; a longer one is refused
(400). Real ones are far shorter (Okta's is 40, X's CRC token about 48, Meta's a number)."""

TOKEN_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/="
)
"""What a challenge may hold: URL-safe and standard base64, digits, `-._~`. Nothing that could
close a JSON string (`"`, `\\`), start markup (`<`, `&`), break a line or start a JSON value:
so an echoed challenge cannot inject into the reply, and a signed one (X's CRC) can never be
the signature of a body the source would accept (every accepted body holds `{`)."""

DEFAULT_TOLERANCE = 300.0

MAX_SIGNATURE_HEADER = 4096
"""The longest value of a header a source verifies with (a signature, its timestamp, the id it
covers), in characters. Real ones are under 1 KiB (PayPal's 4096-bit RSA signature in base64
is 684); a longer one is refused (401) before anything in it is parsed or hashed."""

UTF8_BOM = b"\xef\xbb\xbf"
"""A byte order mark: RFC 8259 forbids JSON senders to add one, and no provider does."""

_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),  # before UTF-16's mark, which it starts with
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)

MAX_SIGNATURES = 16
"""The most signature entries one header may list (Stripe's `v1`, Paddle's `h1`, Standard
Webhooks' `v1,`): a provider sends one per active secret, two while a secret is rolled."""

MAX_EXPENSIVE_CANDIDATES = 2
"""The most distinct candidates of a costly kind one delivery may carry: those that each need
a pass of their own over the body (an Ed25519 signature, whose hash covers its own R; a `t=`
group, whose timestamp comes before the body) or a public-key check (ECDSA). A header listing
more is refused (401) before any is checked. A provider signs one message (one timestamp; one
signature per key it signs with, two while it rotates one), and HMAC candidates, compared
with one digest per secret, stay bounded by `MAX_SIGNATURES` only: so an unsigned request's
candidates cost at most about twice what one honest candidate does."""

MAX_BATCH_EVENTS = 1000
"""The most events one batched delivery may carry (SendGrid, HubSpot, Adyen); a longer batch is
refused whole (400). Providers send far fewer (HubSpot at most 100, Adyen one to a few), and
the bound keeps one request's events within one group-commit statement's parameters."""


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


def header_values(headers: Headers, *names: str) -> list[str]:
    """Every value of the first of `names` present, or `MissingHeader`.

    A plain mapping (a source called directly) holds one value per name. A value a server
    has already combined with others (a WSGI server joins repeated headers with ",") is
    one value here; `signature_items` splits it again where the format allows.
    """
    for name in names:
        if isinstance(headers, HeaderValues):
            found = [value for value in headers.getall(name) if value]
        else:
            value = headers.get(name)
            found = [value] if value else []
        if found:
            return found
    raise MissingHeader(f"missing header {names[0]}")


def signature_items(headers: Headers, *names: str, what: str) -> list[str]:
    """The signatures in every value of a signature header whose format has no comma (hex,
    base64, `sha256=<hex>`): each value, split at commas, so a header repeated on purpose
    (one signature per secret during a rotation) gives one candidate per signature, whether
    the values arrive apart (ASGI, `receive`) or joined by the server (WSGI)."""
    items = [item.strip() for value in header_values(headers, *names) for item in value.split(",")]
    items = [item for item in items if item]
    check_signature_count(len(items), what)
    if not items:
        raise BadSignature(f"{what} is empty")
    return items


def decode_digests(
    headers: Headers,
    *names: str,
    what: str,
    encoding: Literal["hex", "base64"] = "hex",
    prefix: str = "",
) -> list[bytes]:
    """Every well-formed digest among `signature_items`; a malformed one is skipped (another
    may match), and when none is well-formed the first one's fault is the answer."""
    items = signature_items(headers, *names, what=what)
    digests = []
    for item in items:
        try:
            digests.append(decode_digest(item, what=what, encoding=encoding, prefix=prefix))
        except BadSignature:
            continue
    if not digests:
        decode_digest(items[0], what=what, encoding=encoding, prefix=prefix)  # raises
    return digests


def secrets_tuple(secret: str | Sequence[str]) -> tuple[str, ...]:
    """Accept one secret or several (rotation: the old and the new one both verify)."""
    if isinstance(secret, str):
        secrets: tuple[str, ...] = (secret,)
    elif isinstance(secret, Sequence) and not isinstance(secret, bytes):
        secrets = tuple(secret)
    else:  # None from an unset variable, bytes, a number: say so, not "not iterable"
        got = "None (an unset environment variable?)" if secret is None else type(secret).__name__
        raise ConfigurationError(
            f"a secret must be a string, or a list of strings to rotate; got {got}"
        )
    # A blank secret (an unset variable padded with a space or a newline) would be an HMAC key
    # anyone can guess: refused like an empty one.
    if not secrets or any(not isinstance(s, str) or not s.strip() for s in secrets):
        raise ConfigurationError("a source needs at least one non-empty secret, none blank")
    return secrets


def utf8_key(secret: str) -> bytes:
    """The HMAC key of a secret used as it stands (UTF-8), not decoded: most providers' way."""
    try:
        return secret.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError("a secret must be encodable as UTF-8") from exc


def utf8_keys(secret: str | Sequence[str]) -> list[bytes]:
    return [utf8_key(s) for s in secrets_tuple(secret)]


def configured_url(url: str, what: str) -> str:
    """A webhook URL a provider signs (Square, Twilio), checked when the source is built."""
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        raise ConfigurationError(f"{what} must be the full http(s) URL the provider calls")
    try:
        url.encode()
    except UnicodeEncodeError as exc:
        raise ConfigurationError(f"{what} must be encodable as UTF-8") from exc
    if not url.isprintable() or any(c.isspace() for c in url):
        raise ConfigurationError(f"{what} must not contain white space or control characters")
    return url


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


def check_signature_headers(headers: Headers, names: Iterable[str]) -> None:
    """`BadSignature` when a header the source verifies with is longer than
    `MAX_SIGNATURE_HEADER`: checked before any parsing or HMAC, so an unauthenticated
    request cannot make the server parse and compare megabytes of candidates."""
    for name in names:
        value = headers.get(name)
        if value is not None and len(value) > MAX_SIGNATURE_HEADER:
            raise BadSignature(f"{name} is longer than {MAX_SIGNATURE_HEADER} characters")


def distinct_signatures(
    signatures: Iterable[_Signature], what: str, limit: int = MAX_EXPENSIVE_CANDIDATES
) -> list[_Signature]:
    """Each signature once (a header repeated by a proxy lists one twice), or `BadSignature`
    when more than `limit` distinct ones would each cost a check of their own; `what` names
    them as they are counted ("Ed25519 signatures")."""
    distinct = list(dict.fromkeys(signatures))
    if len(distinct) > limit:
        raise BadSignature(f"more than {limit} {what} (each costs a check of its own)")
    return distinct


def check_signature_count(count: int, what: str) -> None:
    """`BadSignature` when a header lists more than `MAX_SIGNATURES` signature entries."""
    if count > MAX_SIGNATURES:
        raise BadSignature(f"{what} lists more than {MAX_SIGNATURES} signatures")


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


def token_digest(token: str) -> bytes:
    """A shared token (GitLab's, Telegram's) as its SHA-256 digest, compared with
    `matches_any` so neither its content nor its length leaks; a token that is no valid text
    (a lone surrogate) is a malformed header, not a crash."""
    try:
        return hashlib.sha256(token.encode()).digest()
    except UnicodeEncodeError as exc:
        raise BadSignature("the token is not valid text") from exc


def require_match(
    keys: Sequence[bytes],
    candidates: Sequence[bytes],
    *signed: bytes,
    algorithm: str = "sha256",
) -> None:
    """`BadSignature` unless some key's HMAC of some signed message equals some candidate.

    Every combination is computed and compared, so the time taken says nothing about which
    secret (or which form of the message) matched.
    """
    digests = [hmac_digest(key, message, algorithm) for key in keys for message in signed]
    if not any([matches_any(digest, candidates) for digest in digests]):
        raise BadSignature()


def decode_digest(
    text: str, *, what: str, encoding: Literal["hex", "base64"] = "hex", prefix: str = ""
) -> bytes:
    """The digest in a signature header: `prefix` (exactly), then hex or strict base64."""
    text = text.strip()
    if not text.startswith(prefix):
        raise BadSignature(f"{what} does not start with {prefix}")
    encoded = text[len(prefix) :]
    try:
        if encoding == "hex":
            return bytes.fromhex(encoded)
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BadSignature(f"{what} is not {encoding}") from exc


def timestamped_signatures(
    header: str, *, what: str, separator: str, timestamp_name: str, signature_name: str
) -> tuple[str, list[bytes]]:
    """The timestamp text and hex signatures of a `t=...,v1=...` style header.

    The first timestamp counts; every signature entry is a candidate, and a malformed one is
    skipped (another may match). Entries of other schemes are ignored.
    """
    timestamp_text: str | None = None
    candidates: list[bytes] = []
    items = header.split(separator)
    check_signature_count(len(items) - 1, what)  # one item is the timestamp
    for item in items:
        name, sep, value = item.strip().partition("=")
        if not sep:
            continue
        if name == timestamp_name and timestamp_text is None:
            timestamp_text = value
        elif name == signature_name:
            try:
                candidates.append(bytes.fromhex(value))
            except ValueError:
                continue
    if timestamp_text is None:
        raise BadSignature(f"{what} has no timestamp")
    if not candidates:
        raise BadSignature(f"{what} has no {signature_name} signature")
    return timestamp_text, candidates


def verify_timestamped(
    keys: Sequence[bytes],
    candidates: Sequence[bytes],
    timestamp_text: str,
    body: bytes,
    *,
    now: float,
    tolerance: float | None,
    prefix: bytes = b"",
    separator: bytes = b".",
    algorithm: str = "sha256",
    per_second: int = 1,
) -> None:
    """Check an HMAC over `{prefix}{timestamp}{separator}{body}`, then the timestamp's age.

    The timestamp must be digits, in seconds or (`per_second=1000`, WorkOS) milliseconds; the
    age is checked only once the signature matches, so a forged delivery is reported as
    forged, not as late.
    """
    timestamp = parse_timestamp(timestamp_text, per_second=per_second)
    signed = prefix + timestamp_text.strip().encode() + separator + body
    require_match(keys, candidates, signed, algorithm=algorithm)
    check_tolerance(timestamp / per_second, now=now, tolerance=tolerance)


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


def check_prefixed_hex_hmac(
    headers: Headers,
    body: bytes,
    keys: Sequence[bytes],
    *,
    prefix: str,
    name: str,
    algorithm: str = "sha256",
) -> None:
    """The header `name` (or one of its values) is `prefix` + the hex HMAC of `body` under one
    of `keys` (GitHub, Mollie, Lemon Squeezy, Linear; Intercom's with SHA-1). Raises
    `BadSignature` naming the header when no value is well-formed or none matches."""
    candidates = decode_digests(headers, name.lower(), what=name, prefix=prefix)
    require_match(keys, candidates, body, algorithm=algorithm)


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


def parse_query(raw: str | bytes | None) -> dict[str, list[str]]:
    """A query string as a dict of every value of each name (`+` and percent escapes decoded,
    UTF-8, as Flask's `request.args` and Django's `request.GET` read it); `PayloadError` when it
    is longer than `MAX_QUERY` or holds more than `MAX_QUERY_FIELDS` fields."""
    if not raw:
        return {}
    text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
    if len(text) > MAX_QUERY:
        raise PayloadError(f"query string longer than {MAX_QUERY} characters")
    try:
        return parse_qs(
            text, keep_blank_values=True, errors="replace", max_num_fields=MAX_QUERY_FIELDS
        )
    except ValueError as exc:
        raise PayloadError(f"query string holds more than {MAX_QUERY_FIELDS} fields") from exc


def query_value(query: Query, name: str) -> str | None:
    """The one value of `name` in the query, None when absent; `PayloadError` when it is given
    twice (which of two challenges would be answered is not for a sender to choose)."""
    values = query.get(name)
    if not values:
        return None
    if len(values) > 1:
        raise PayloadError(f"query parameter {name} given {len(values)} times")
    return values[0]


def challenge_text(
    value: str | None, what: str, *, allowed: frozenset[str] = TOKEN_CHARACTERS
) -> str:
    """A challenge fit to echo or sign: present, at most `MAX_CHALLENGE` characters, and only
    `allowed` characters; `PayloadError` (400) otherwise."""
    if not value:
        raise PayloadError(f"no {what}")
    if len(value) > MAX_CHALLENGE:
        raise PayloadError(f"{what} is longer than {MAX_CHALLENGE} characters")
    if not allowed.issuperset(value):
        raise PayloadError(f"{what} holds characters a challenge does not")
    return value


def matches_secret(presented: str, secrets: Sequence[bytes]) -> bool:
    """Whether `presented` equals one of `secrets` (UTF-8), compared against every one
    without stopping at a match (a shared token, a verify token, a client state). Their
    SHA-256 digests are compared, as GitLab's token is: equal lengths, so the time taken
    tells neither the content nor the length of a secret."""
    try:
        given = token_digest(presented)
    except BadSignature:  # a lone surrogate: no secret holds one
        return False
    return matches_any(given, [hashlib.sha256(secret).digest() for secret in secrets])


def presented_tokens(headers: Headers, name: str, what: str) -> list[str]:
    """Every value of a header carrying a shared token and, for values a WSGI server joined
    with commas, each part too (a token may hold a comma); at most `MAX_SIGNATURES`."""
    values = header_values(headers, name)
    given = list(dict.fromkeys([*values, *signature_items(headers, name, what=what)]))
    check_signature_count(len(given), what)
    return given


class Source(ABC):
    """A webhook provider's verification and identification rules, configured with secrets."""

    default_name: ClassVar[str]
    redelivery_window: timedelta = timedelta(days=3)
    """How long the provider may send an event again (automatic retries or a manual resend).
    The retention must be longer, or a pruned key could no longer deduplicate a redelivery."""
    stored_headers: tuple[str, ...] = ()
    """Header names (lower case) kept with the event to re-verify and audit it. Never secrets."""
    signature_headers: tuple[str, ...] = ()
    """Header names (lower case) `verify` reads: each is refused (401) past
    `MAX_SIGNATURE_HEADER` characters before `verify` runs. A test holds that every source
    class names the headers its signatures travel in."""
    verifies_over_network: ClassVar[bool] = False
    """True when verifying may call the provider (a certificate, an API): the ASGI app then
    verifies in a worker thread instead of on its event loop."""
    batched: ClassVar[bool] = False
    """True for a `BatchSource`: one delivery carries several events (`authenticate_batch`)."""
    acknowledgement: ClassVar[str | None] = None
    """The plain-text body of a 2xx answer to an event delivery (accepted or duplicate), for a
    provider that requires one (Adyen: `[accepted]`); None answers the JSON of
    docs/ingest.md. Refusals and handshakes keep their own bodies."""
    answers_get: ClassVar[bool] = False
    """True for a source whose provider sends a GET or HEAD to its path (`answer_get`); the
    others answer both 405, as every other method but POST."""
    reads_query: ClassVar[bool] = False
    """True for a source whose POSTs are judged with their query string (`check_query`): only
    for these does the receiver parse it, so the others pay nothing for it."""

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

    def listing(self) -> Listing:
        """What `hookinbox reconcile` lists from the provider's API (`_provider_api.py`).

        Only a source configured with the provider's API credentials has one (Stripe's
        `api_key`); the others raise `ConfigurationError`, one line saying so."""
        raise ConfigurationError(
            f"source {self.name!r} ({type(self).__name__}) cannot reconcile: hookinbox lists "
            "events from Stripe's, GitHub's and Square's APIs (docs/reconcile.md)"
        )

    def handshake(self, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        """The answer to a verified delivery that is a handshake rather than an event.

        An answer is sent at once and nothing is stored: a dict as JSON with 200 (Slack's
        `url_verification` challenge, Discord's PING), a string as `text/plain` with 200
        (Twitch's challenge), or a `Handshake` to choose the content type or the status.
        None, the default, goes on to `identify`. Called by `authenticate`, only after
        `verify` succeeded; may raise `PayloadError`.
        """
        return None

    def answer_get(self, query: Query, headers: Headers) -> HandshakeAnswer | None:
        """The answer to a GET (or HEAD, answered alike without its body) on the source's path.

        For a provider that checks the endpoint with one (Meta's `hub.challenge`, Dropbox's
        `challenge`, X's CRC, Okta's verification, Trello's HEAD); a source that has one sets
        `answers_get`. Nothing is stored. The answer is what `handshake` returns; raise
        `VerificationError` for a request that does not prove itself (a wrong verify token:
        answered 403) and `PayloadError` for one that is not the provider's (400). None, the
        default, answers 405 as for a source without one.
        """
        return None

    def check_query(self, query: Query, headers: Headers, body: bytes) -> HandshakeAnswer | None:
        """For a source that `reads_query`: judge a POST's query string before anything else.

        Return an answer for a handshake that lives there (Microsoft Graph's
        `validationToken`), raise `VerificationError` when the query fails to prove the
        delivery (Event Grid's key), or return None to go on with `verify`.
        """
        return None

    def _query_answer(self, query: Query | None, headers: Headers, body: bytes) -> None:
        """`check_query`'s answer raised as a `Handshake`, for a source that reads its query."""
        if query is None:
            query = {}
        answer = self.check_query(query, headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)

    def authenticate(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> Identity:
        """Verify, then identify: the body is not decoded before it is proven authentic.

        A verified handshake raises `Handshake` with the source's answer (the receiver sends
        it with 200 and stores nothing). `query` is the request's parsed query string, which
        the receiver passes only to a source that `reads_query`.
        """
        if self.reads_query:
            self._query_answer(query, headers, body)
        check_signature_headers(headers, self.signature_headers)
        self.verify(headers, body, now=now)
        # After verifying (a forged body stays 401) and before the handshake (a UTF-16 Zoom
        # challenge is refused, not taken for an event): see `refuse_other_encodings`.
        refuse_other_encodings(body)
        answer = self.handshake(headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)
        return self.identify(headers, body)

    def check_and_verify(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> None:
        """`authenticate`'s first half: the query (a source that reads it), bound the signature
        headers, verify, refuse a body that is not plain UTF-8."""
        if self.reads_query:
            self._query_answer(query, headers, body)
        check_signature_headers(headers, self.signature_headers)
        self.verify(headers, body, now=now)
        refuse_other_encodings(body)

    def headers_to_store(self, headers: Headers) -> dict[str, str]:
        kept = ("content-type", "user-agent", *self.stored_headers)
        return {name: headers[name] for name in kept if name in headers}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class SecretSource(Source):
    """A source verified with one or more secrets (several while one is rotated)."""

    def __init__(self, *, secret: str | Sequence[str], name: str | None = None) -> None:
        super().__init__(name=name)
        self._keys = [self.decode_key(s) for s in secrets_tuple(secret)]

    @staticmethod
    def decode_key(secret: str) -> bytes:
        """The HMAC key of one configured secret."""
        return utf8_key(secret)


class TimestampedSource(SecretSource):
    """A source whose signature covers a timestamp, held within `tolerance` seconds of now."""

    def __init__(
        self,
        *,
        secret: str | Sequence[str],
        name: str | None = None,
        tolerance: float | None = DEFAULT_TOLERANCE,
    ) -> None:
        super().__init__(secret=secret, name=name)
        self.tolerance = tolerance


class SignatureListSource(TimestampedSource):
    """One header listing a timestamp and hex HMAC-SHA256 signatures (Stripe, Paddle).

    `{timestamp_name}=<unix>{separator}{signature_name}=<hex>[{separator}...]`, each signature
    over `{timestamp}{joiner}{body}`; any signature may match any secret.
    """

    signature_header: ClassVar[str]
    header_label: ClassVar[str]
    separator: ClassVar[str]
    timestamp_name: ClassVar[str]
    signature_name: ClassVar[str]
    joiner: ClassVar[bytes]
    per_second: ClassVar[int] = 1
    """1 for a timestamp in seconds; 1000 where the provider signs milliseconds (WorkOS)."""

    def verify(self, headers: Headers, body: bytes, *, now: float) -> None:
        """Each timestamp with its signatures is checked on its own: a header repeated (its
        values apart, or joined by a WSGI server) lists several, and one verifying is enough.

        Each distinct timestamp is another signed message over the whole body: groups that
        share one are checked together (one HMAC per secret), and more than
        `MAX_EXPENSIVE_CANDIDATES` distinct timestamps are refused before any HMAC."""
        # The values joined as a server would: `t=1` and `v1=...` sent apart are one group.
        # A WSGI server joins the values with ","; each value starts with its timestamp, so a
        # comma before a timestamp entry separates too (Paddle's separator is ";").
        joined = self.separator.join(header_values(headers, self.signature_header))
        if self.separator != ",":
            joined = re.sub(rf",\s*(?={re.escape(self.timestamp_name)}=)", self.separator, joined)
        groups = timestamp_groups(joined, self.separator, self.timestamp_name)
        # The limit holds across groups: every entry but the timestamps is a signature.
        check_signature_count(joined.count(self.separator) + 1 - len(groups), self.header_label)
        failures: list[VerificationError] = []
        by_time: dict[str, list[bytes]] = {}
        for group in groups:
            try:
                timestamp_text, candidates = timestamped_signatures(
                    group,
                    what=self.header_label,
                    separator=self.separator,
                    timestamp_name=self.timestamp_name,
                    signature_name=self.signature_name,
                )
            except VerificationError as exc:
                failures.append(exc)
                continue
            by_time.setdefault(timestamp_text.strip(), []).extend(candidates)
        if len(by_time) > MAX_EXPENSIVE_CANDIDATES:
            raise BadSignature(
                f"{self.header_label} lists more than {MAX_EXPENSIVE_CANDIDATES} timestamps (each "
                "is another signed message over the whole body)"
            )
        for timestamp_text, candidates in by_time.items():
            try:
                verify_timestamped(
                    self._keys,
                    candidates,
                    timestamp_text,
                    body,
                    now=now,
                    tolerance=self.tolerance,
                    separator=self.joiner,
                    per_second=self.per_second,
                )
                return
            except VerificationError as exc:
                failures.append(exc)
        # A genuine but late signature says more than a forged one beside it.
        late = [f for f in failures if isinstance(f, TimestampOutOfTolerance)]
        raise (late or failures)[0]


def timestamp_groups(value: str, separator: str, timestamp_name: str) -> list[str]:
    """`t=1,v1=a,t=2,v1=b` (two headers a server joined) as `t=1,v1=a` and `t=2,v1=b`: a new
    group starts at each timestamp entry after the first."""
    groups: list[list[str]] = [[]]
    timed = False  # whether the current group has its timestamp
    for item in value.split(separator):
        if item.strip().partition("=")[0] == timestamp_name:
            if timed:
                groups.append([])
            timed = True
        groups[-1].append(item)
    return [separator.join(group) for group in groups]


def parse_timestamp(raw: str, *, per_second: int = 1) -> int:
    """A signed Unix timestamp in seconds (or milliseconds, `per_second=1000`); anything else
    is a malformed signature. At most 12 digits in seconds, 15 in milliseconds."""
    raw = raw.strip()
    limit = 12 + len(str(per_second)) - 1
    if not raw.isascii() or not raw.isdigit() or len(raw) > limit:
        raise BadSignature("malformed signature timestamp")
    return int(raw)


def parse_zoned_time(text: str, what: str) -> datetime:
    """A signed ISO 8601 / RFC 3339 time that names its zone (`2016-07-11T10:10:33-07:00`,
    `2021-06-14T20:43:57Z`), in UTC; anything else is a malformed signature (Box, Zendesk)."""
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadSignature(f"{what} is not an ISO 8601 time") from exc
    if parsed.tzinfo is None:
        raise BadSignature(f"{what} has no time zone offset")
    return parsed.astimezone(UTC)


def check_tolerance(timestamp: float, *, now: float, tolerance: float | None) -> None:
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


class BatchSource(Source):
    """A provider that puts several events in one signed delivery (SendGrid, HubSpot, Adyen).

    `identify_batch` turns a verified body into one `Identity` per event, each with its own
    id and the bytes to store for it (`Identity.body`: the event's own JSON, not the whole
    batch, so a handler reads one event and a redelivery of it hashes alike). The receiver
    stores them in one transaction and answers once. A body that is no batch at all (not
    the provider's list, empty, over `MAX_BATCH_EVENTS`) is refused whole (400). An event
    of a readable batch that names no usable id is not a reason to lose the others: these
    providers do not retry a 4xx, so refusing the batch would drop every valid event in it.
    It is stored as `invalid` instead (`identify_items`), where an operator sees it, and the
    delivery is answered 2xx.
    """

    batched: ClassVar[bool] = True

    @abstractmethod
    def identify_batch(self, headers: Headers, body: bytes) -> list[Identity]:
        """One identity per event of a verified delivery; `PayloadError` if any is unusable."""

    def identify(self, headers: Headers, body: bytes) -> Identity:
        """The event of a batch of one (the receiver itself calls `identify_batch`)."""
        identities = self.identify_batch(headers, body)
        if len(identities) != 1:
            raise PayloadError(f"a batch of {len(identities)} events: use identify_batch")
        if identities[0].invalid is not None:
            raise PayloadError(identities[0].invalid)
        return identities[0]

    @staticmethod
    def identify_items(
        items: Iterable[JsonSlice], identify: Callable[[Any], Identity]
    ) -> list[Identity]:
        """`identify` of each event of a batch, stored as its own bytes; one it refuses
        (`PayloadError`) becomes an `invalid` identity (`invalid_identity`) rather than
        failing the batch."""
        identities = []
        for item in items:
            try:
                identity = identify(item.value)
            except PayloadError as error:
                identities.append(invalid_identity(item, error.message))
                continue
            # A retry may format the batch anew: what it must repeat is the event's JSON.
            fingerprint = identity.fingerprint or compact_json(item.value)
            identities.append(replace(identity, body=item.raw, fingerprint=fingerprint))
        return identities

    def authenticate_batch(
        self, headers: Headers, body: bytes, *, now: float, query: Query | None = None
    ) -> list[Identity]:
        """`authenticate` for a batch: verify the body, then one identity per event."""
        self.check_and_verify(headers, body, now=now, query=query)
        answer = self.handshake(headers, body)
        if isinstance(answer, Handshake):
            raise answer
        if answer is not None:
            raise Handshake(answer)
        identities = self.identify_batch(headers, body)
        if not identities:
            raise PayloadError("the batch holds no event")
        if len(identities) > MAX_BATCH_EVENTS:
            raise PayloadError(f"the batch holds more than {MAX_BATCH_EVENTS} events")
        return identities


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


def compact_json(item: Any) -> bytes:
    """One event of a batch as compact JSON, keys in the order sent: what a redelivery of it
    repeats, whatever the spacing of the batch around it."""
    text = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate escaped in the batch
