"""Reading and checking signatures: what providers' schemes share.

Where a signature travels (each value of a header, bounded before anything in it is parsed),
how it is written (hex or base64 behind a prefix, a `t=...,v1=...` list), how it is compared
(an HMAC per key and signed message, each candidate compared in constant time, with no early
exit) and how old its signed timestamp may be (`check_tolerance`, both ways). Every fault is a
`VerificationError` (`BadSignature`, `MissingHeader`, `TimestampOutOfTolerance`), and the
bounds (`MAX_SIGNATURE_HEADER`, `MAX_SIGNATURES`, `MAX_EXPENSIVE_CANDIDATES`) keep what an
unsigned request can make the server compute small.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal, TypeVar

from hookinbox._errors import BadSignature, MissingHeader, TimestampOutOfTolerance
from hookinbox._headers import HeaderValues

_Signature = TypeVar("_Signature", bytes, str)

Headers = Mapping[str, str]
"""Request headers with lower-case names, as every entry point hands them over
(`hookinbox._headers.normalize_headers`)."""

MAX_SIGNATURE_HEADER = 4096
"""The longest value of a header a source verifies with (a signature, its timestamp, the id it
covers), in characters. Real ones are under 1 KiB (PayPal's 4096-bit RSA signature in base64
is 684); a longer one is refused (401) before anything in it is parsed or hashed."""

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

DEFAULT_TOLERANCE = 300.0


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


def require_header(headers: Headers, *names: str) -> str:
    """The first of `names` present and non-empty, or `MissingHeader`."""
    for name in names:
        value = headers.get(name)
        if value:
            return value
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


def presented_tokens(headers: Headers, name: str, what: str) -> list[str]:
    """Every value of a header carrying a shared token and, for values a WSGI server joined
    with commas, each part too (a token may hold a comma); at most `MAX_SIGNATURES`."""
    values = header_values(headers, name)
    given = list(dict.fromkeys([*values, *signature_items(headers, name, what=what)]))
    check_signature_count(len(given), what)
    return given


def check_signature_headers(headers: Headers, names: Iterable[str]) -> None:
    """`BadSignature` when a header the source verifies with is longer than
    `MAX_SIGNATURE_HEADER`: checked before any parsing or HMAC, so an unauthenticated
    request cannot make the server parse and compare megabytes of candidates."""
    for name in names:
        value = headers.get(name)
        if value is not None and len(value) > MAX_SIGNATURE_HEADER:
            raise BadSignature(f"{name} is longer than {MAX_SIGNATURE_HEADER} characters")


def check_signature_count(count: int, what: str) -> None:
    """`BadSignature` when a header lists more than `MAX_SIGNATURES` signature entries."""
    if count > MAX_SIGNATURES:
        raise BadSignature(f"{what} lists more than {MAX_SIGNATURES} signatures")


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


def hmac_digest(key: bytes, message: bytes, algorithm: str = "sha256") -> bytes:
    return hmac.new(key, message, algorithm).digest()


def matches_any(expected: bytes, candidates: Iterable[bytes]) -> bool:
    """Constant-time comparison against every candidate (no early exit on a match)."""
    found = False
    for candidate in candidates:
        found |= hmac.compare_digest(expected, candidate)
    return found


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


def token_digest(token: str) -> bytes:
    """A shared token (GitLab's, Telegram's) as its SHA-256 digest, compared with
    `matches_any` so neither its content nor its length leaks; a token that is no valid text
    (a lone surrogate) is a malformed header, not a crash."""
    try:
        return hashlib.sha256(token.encode()).digest()
    except UnicodeEncodeError as exc:
        raise BadSignature("the token is not valid text") from exc


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
