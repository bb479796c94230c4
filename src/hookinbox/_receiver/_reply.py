"""The answer to one request on a source's path, independent of any web framework.

`Reply` is what every entry answers (the ASGI app, the adapters, `inbox.receive`), `Outcome`
what became of the delivery (the label of the delivery metrics, the word of the log line).
The answers every receiver gives alike are built here, so that a status code, a header or a
detail is written once: a refusal, a 503 with `Retry-After`, a handshake's answer, a 405, a
batch's one answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hookinbox._errors import Handshake


class Outcome(StrEnum):
    """What became of one delivery; also the label of the delivery metrics."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    IGNORED = "ignored"  # a fetch-to-verify source found no such resource: nothing kept
    HANDSHAKE = "handshake"  # a verified provider handshake (Slack's challenge): nothing kept
    INVALID_SIGNATURE = "invalid_signature"
    BAD_REQUEST = "bad_request"
    UNKNOWN_SOURCE = "unknown_source"
    TOO_LARGE = "too_large"
    TIMEOUT = "timeout"  # the body did not arrive within body_timeout: nothing kept
    UNAVAILABLE = "unavailable"
    NOT_PROCESSED = "not_processed"  # inline mode: the handler raised, nothing was kept
    IN_PROGRESS = "in_progress"  # Redis claim mode: another copy's handlers are running
    ERROR = "error"


STORED = frozenset({Outcome.ACCEPTED, Outcome.DUPLICATE})
"""The outcomes of a delivery whose event is stored: a source's own answer replaces ours."""
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Reply:
    """The answer to one delivery, independent of any web framework."""

    status_code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    outcome: Outcome = Outcome.ACCEPTED
    event_type: str | None = None
    key_conflict: bool = False
    media_type: str = "application/json"
    raw: bytes | None = None
    """The bytes to send instead of `body` as JSON: a handshake answered in text (Twitch), a
    source's `acknowledgement` (Adyen's `[accepted]`); `body` still says what happened, for
    the logs and `inbox.receive`."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def content(self) -> bytes:
        """The body to send, byte for byte the same from every adapter: `body` as JSON,
        unless the reply carries bytes of its own (`raw`, of type `media_type`)."""
        if self.raw is not None:
            return self.raw
        return _json_bytes(self.body)


_compact_json = json.JSONEncoder(separators=(",", ":")).encode
"""`json.dumps` with these separators, without building an encoder per call as it does."""
_quote = json.encoder.encode_basestring_ascii
"""A JSON string exactly as `json.dumps` writes one (ASCII, escaped), in C."""
_STORED_KEYS = ["status", "event_id"]


def _json_bytes(document: dict[str, Any]) -> bytes:
    """`document` as compact JSON. The answer to nearly every delivery, `{"status": ...,
    "event_id": ...}`, is written directly: the same bytes `json.dumps` gives, without the
    encoder it builds for every call (a few microseconds per delivery)."""
    if list(document) == _STORED_KEYS:
        status, event_id = document["status"], document["event_id"]
        if type(status) is str and type(event_id) is str:
            return f'{{"status":{_quote(status)},"event_id":{_quote(event_id)}}}'.encode()
    return _compact_json(document).encode()


INTERNAL_ERROR = Reply(500, {"status": "error", "error": "internal"})
"""The answer to a request that met a bug in hookinbox (logged, never shown)."""

METHOD_NOT_ALLOWED = b"Method Not Allowed"


def reject(status_code: int, outcome: Outcome, detail: str, **headers: str) -> Reply:
    """A refusal: `rejected`, the outcome as the error, and why."""
    body = {"status": "rejected", "error": outcome.value, "detail": detail}
    return Reply(status_code, body, dict(headers), outcome)


def unavailable(detail: str, retry_after: int) -> Reply:
    """503 with `Retry-After`: not stored now, the provider retries."""
    return reject(503, Outcome.UNAVAILABLE, detail, **{"retry-after": str(retry_after)})


def not_processed(detail: str, retry_after: int) -> Reply:
    """503 for a delivery whose handlers ran in the request and did not finish (inline
    sources, claim mode): nothing of it is kept, the provider's retry runs them again."""
    body = {"status": "retry", "error": Outcome.NOT_PROCESSED.value, "detail": detail}
    return Reply(503, body, {"retry-after": str(retry_after)}, Outcome.NOT_PROCESSED)


def method_not_allowed(allow: str) -> Reply:
    """405 for a method a source's path does not take, naming those it does."""
    return Reply(
        405, {}, {"allow": allow}, Outcome.BAD_REQUEST, media_type=TEXT, raw=METHOD_NOT_ALLOWED
    )


def handshake_reply(handshake: Handshake) -> Reply:
    """A handshake's answer as the provider wants it: JSON (`body` is the answer, as the logs
    read it), or text sent as it stands. Either may echo what the request sent (a challenge),
    so the answer says `nosniff`: a browser never reads it as anything but its content type
    (Dropbox asks for it; harmless for the others)."""
    if isinstance(handshake.answer, dict):
        body, raw = handshake.answer, None
    else:
        body, raw = {}, handshake.content
    return Reply(
        handshake.status,
        body,
        {**handshake.headers, "x-content-type-options": "nosniff"},
        Outcome.HANDSHAKE,
        media_type=handshake.content_type,
        raw=raw,
    )


def batch_reply(events: int, accepted: int, key_conflict: bool, invalid: int = 0) -> Reply:
    """The one answer to a batched delivery: `accepted` when it held any new event. `invalid`
    counts its events held as invalid (they are among `events`), said only when there are."""
    outcome = Outcome.ACCEPTED if accepted else Outcome.DUPLICATE
    body: dict[str, Any] = {
        "status": outcome.value,
        "events": events,
        "accepted": accepted,
        "duplicates": events - accepted,
    }
    if invalid:
        body["invalid"] = invalid
    return Reply(200, body, {}, outcome, None, key_conflict)
