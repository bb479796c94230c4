"""Ingest, framework-neutral: verify a delivery, store it once, and say what to answer.

The HTTP app and `Inbox.receive` (Flask, Django) both call `Receiver.receive`; neither decides
a status code on its own. The order is fixed: find the source, bound the body, verify the raw
bytes, parse, store durably, answer. Nothing is written before verification succeeds, and
nothing is answered 2xx before the transaction holding the event has committed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any, cast

from sqlalchemy import Connection

from hookinbox import _tracing as tracing
from hookinbox._errors import (
    AckDeadlinePassed,
    BodyTooLarge,
    DeliveryIgnored,
    Handshake,
    NotReady,
    PayloadError,
    StoreUnavailable,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._headers import normalize_headers
from hookinbox._logging import logger
from hookinbox._metrics import count_delivery, exposition
from hookinbox._model import Event, NewDelivery, RecordedDelivery, Status
from hookinbox._settings import ReceiverSettings
from hookinbox._storage import GroupCommitter, Store
from hookinbox.sources import Identity, Source
from hookinbox.sources._base import BatchSource, parse_query

log = logger("hookinbox.ingest")

Stored = RecordedDelivery | list[RecordedDelivery]
"""What storing a verified delivery did: one result, or one per event of a batch."""

InlineProcessor = Callable[[Connection, Event], None]
"""Runs an event's handlers inside the connection's transaction and marks it processed."""


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
TEXT = "text/plain; charset=utf-8"
"""The outcomes of a delivery whose event is stored: a source's own answer replaces ours."""


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


def _reject(status_code: int, outcome: Outcome, detail: str, **headers: str) -> Reply:
    body = {"status": "rejected", "error": outcome.value, "detail": detail}
    return Reply(status_code, body, dict(headers), outcome)


def _handshake(handshake: Handshake) -> Reply:
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


METHOD_NOT_ALLOWED = b"Method Not Allowed"


@dataclass(frozen=True, slots=True)
class Verified:
    """A delivery that passed verification and waits to be stored."""

    delivery: NewDelivery
    started: float
    """`time.perf_counter()` when the delivery reached the receiver (for the ack latency)."""
    answer: dict[str, Any] | None = None
    """The source's own body for a stored event (`Identity.answer`), sent instead of ours."""
    batch: tuple[NewDelivery, ...] = ()
    """Every event of a batched delivery (`delivery` is the first), stored in one
    transaction; empty for the usual delivery of one event."""
    span: Any = field(default=None, repr=False, compare=False)
    """The delivery's `receive` span (OpenTelemetry), ended with the reply; None without it."""
    verified_ns: int = 0
    """`time.time_ns()` when verification ended: where the `store` span starts."""
    _answered: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def settle(self) -> bool:
        """True the first time only: that reply is the one logged and counted.

        Storing and the ack deadline race: when the deadline wins, the request is answered
        503 and the store that finishes later must not be counted as a second answer.
        """
        return self._answered.acquire(blocking=False)


class BaseReceiver(ABC):
    """What every receiver does alike: find the source, bound the body, verify, log, count.

    The HTTP app and `Inbox.receive` talk to this contract only. `Receiver` stores each event
    in the SQL database; `hookinbox.claims.ClaimReceiver` claims it in Redis and runs its
    handlers inline. A subclass sets the attributes and decides `store_verified`.
    """

    sources: Mapping[str, Source]
    settings: ReceiverSettings
    retention: timedelta | None = None
    committer: GroupCommitter | None = None

    @property
    def max_body_size(self) -> int:
        return self.settings.max_body_size

    @property
    def body_timeout(self) -> float:
        return self.settings.body_timeout

    @property
    def retry_after(self) -> int:
        return self.settings.retry_after

    @property
    def ack_deadline(self) -> float | None:
        return self.settings.ack_deadline

    @property
    def clock(self) -> Callable[[], float]:
        return self.settings.clock

    def receive(
        self,
        source_name: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        body: bytes,
        *,
        query: str | bytes | None = None,
    ) -> Reply:
        step = self.verify(source_name, headers, body, query=query)
        if isinstance(step, Reply):
            return step
        return self.store_verified(step)

    def verify(
        self,
        source_name: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        body: bytes,
        *,
        query: str | bytes | None = None,
    ) -> Reply | Verified:
        """The first half of `receive`: a `Verified` delivery to store, or the final reply.

        `query` is the request's query string, read only by a source that `reads_query`."""
        started = time.perf_counter()
        source = self.sources.get(source_name)
        if source is None:
            reply = _reject(404, Outcome.UNKNOWN_SOURCE, f"no source named {source_name!r}")
            # The name comes from the URL: never a span name either (cardinality).
            span = tracing.start_receive("unknown", {}, len(body))
        elif len(body) > self.max_body_size:
            reply = self._too_large()
            span = tracing.start_receive(source_name, {}, len(body))
        else:
            step = self._verify(source, normalize_headers(headers), body, started, query)
            if isinstance(step, Verified):
                return step
            reply, span = step
        return self._finish(source_name, reply, started, known=source is not None, span=span)

    def answer_get(
        self,
        source_name: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]],
        query: str | bytes | None = None,
    ) -> Reply:
        """The answer to a GET or HEAD on a source's path: its handshake (`Source.answer_get`),
        or 405 where there is none (an unknown name too, as before any source had one).

        Nothing is read from a body and nothing is stored. A request that does not prove
        itself (a wrong verify token) is 403, one that is not the provider's handshake 400;
        both are logged and counted as deliveries refused, the handshakes as `handshake`."""
        source = self.sources.get(source_name)
        if source is None or not source.answers_get:
            return self.method_not_allowed(source_name)
        started = time.perf_counter()
        try:
            answer = source.answer_get(parse_query(query), normalize_headers(headers))
        except VerificationError as error:
            reply = _reject(403, Outcome.INVALID_SIGNATURE, error.message)
        except PayloadError as error:
            reply = _reject(400, Outcome.BAD_REQUEST, error.message)
        else:
            if answer is None:
                return self.method_not_allowed(source_name)
            handshake = answer if isinstance(answer, Handshake) else Handshake(answer)
            reply = _handshake(handshake)
        return self._finish(source_name, reply, started, known=True)

    def method_not_allowed(self, source_name: str) -> Reply:
        """405 for a method the source's path does not take, naming those it does."""
        source = self.sources.get(source_name)
        allow = "GET, HEAD, POST" if source is not None and source.answers_get else "POST"
        return Reply(
            405, {}, {"allow": allow}, Outcome.BAD_REQUEST, media_type=TEXT, raw=METHOD_NOT_ALLOWED
        )

    def committer_for(self, verified: Verified) -> GroupCommitter | None:
        """The group committer that stores this delivery, or None: `store_verified` then
        handles it in a thread of its own."""
        return None

    @abstractmethod
    def store_verified(self, verified: Verified) -> Reply:
        """The second half of `receive`, for a delivery that `verify` passed (blocking)."""

    def conclude(self, verified: Verified, result: Stored | Exception) -> Reply:
        """The reply once the committer of `committer_for` stored the delivery or raised."""
        raise TypeError(f"{type(self).__name__} stores nothing through a group committer")

    def conclude_late(self, verified: Verified, result: object) -> None:
        """What became of a delivery answered 503 at its ack deadline, once its write ended
        (the committer's `late` callback): logged, never counted as a second answer."""
        raise TypeError(f"{type(self).__name__} stores nothing through a group committer")

    @abstractmethod
    def ping(self) -> None:
        """Raise `StoreUnavailable` unless the backing store answers (the readiness probe)."""

    @abstractmethod
    def metrics(self) -> tuple[bytes, str]:
        """The `/metrics` body and its content type."""

    def reject_too_large(self, source_name: str) -> Reply:
        """For servers that stop reading a body once it passes the limit."""
        reply = self._too_large()
        self._log(source_name, reply, 0.0)
        count_delivery(source_name, None, reply.outcome.value, 0.0, key_conflict=False)
        return reply

    def reject_unavailable(self, source_name: str, detail: str, elapsed: float) -> Reply:
        """503 for a delivery that could not be verified in time through no fault of its
        own (every slot for verifying with its provider was taken): the provider retries."""
        reply = self.unavailable(detail)
        self._log(source_name, reply, elapsed)
        count_delivery(source_name, None, reply.outcome.value, elapsed, key_conflict=False)
        return reply

    def reject_slow_body(self, source_name: str) -> Reply:
        """For servers that stop waiting for a body that did not arrive within `body_timeout`."""
        detail = f"body not received within {self.body_timeout:g} s"
        # The rest of the body may still be on its way: the connection cannot serve another
        # request, so the answer says it closes.
        reply = _reject(408, Outcome.TIMEOUT, detail, connection="close")
        self._log(source_name, reply, self.body_timeout)
        count_delivery(source_name, None, reply.outcome.value, 0.0, key_conflict=False)
        return reply

    def _too_large(self) -> Reply:
        return _reject(413, Outcome.TOO_LARGE, f"body over {self.max_body_size} bytes")

    def unavailable(self, detail: str) -> Reply:
        return _reject(503, Outcome.UNAVAILABLE, detail, **{"retry-after": str(self.retry_after)})

    def time_left(self, verified: Verified) -> float | None:
        """Seconds left before `verified`'s ack deadline (None: no deadline)."""
        if self.ack_deadline is None:
            return None
        return max(0.0, self.ack_deadline - (time.perf_counter() - verified.started))

    def past_deadline(self, verified: Verified) -> Reply:
        """The 503 for a delivery not stored within the ack deadline (it may be, later)."""
        reply = self.unavailable(AckDeadlinePassed(self.ack_deadline or 0.0).message)
        return self.finish_verified(verified, reply)

    def finish_verified(self, verified: Verified, reply: Reply) -> Reply:
        """Log and count the reply to a verified delivery, unless it was answered already."""
        delivery = verified.delivery
        if reply.outcome in STORED:
            reply = self._source_answer(verified, reply)
        if verified.settle():
            if verified.span is not None:
                storing = tracing.start_child(
                    verified.span, "store", self.store_attributes(), kind="client",
                    start_time=verified.verified_ns,
                )  # fmt: skip
                tracing.end(storing, error=_server_error(reply))
            return self._finish(
                delivery.source, reply, verified.started, known=True, delivery=delivery,
                span=verified.span,
            )  # fmt: skip
        # The ack deadline answered 503 first; say what became of the delivery after all.
        self._log_late(delivery, reply)
        return reply

    def _log_late(self, delivery: NewDelivery, reply: Reply) -> None:
        log.log(
            logging.INFO if reply.ok else logging.WARNING,
            "%s %s: %s %d after the ack deadline (answered 503 in time; a retry of an event "
            "stored now is answered as a duplicate)",
            delivery.source,
            delivery.event_id,
            reply.outcome.value,
            reply.status_code,
            extra={"source": delivery.source, "event_id": delivery.event_id, "late": True},
        )

    def _source_answer(self, verified: Verified, reply: Reply) -> Reply:
        """A stored delivery's reply in the source's own words, if it has any: a JSON body of
        its event's (`Identity.answer`, Discord) or a text for every one (`acknowledgement`,
        Adyen's `[accepted]`, sent as it stands while `body` keeps our fields for the logs)."""
        if verified.answer is not None:
            reply = replace(reply, body=verified.answer)
        acknowledgement = self.sources[verified.delivery.source].acknowledgement
        if acknowledgement is not None:
            reply = replace(reply, raw=acknowledgement.encode(), media_type=TEXT)
        return reply

    def _finish(
        self,
        source_name: str,
        reply: Reply,
        started: float,
        *,
        known: bool,
        delivery: NewDelivery | None = None,
        span: Any = None,
    ) -> Reply:
        elapsed = time.perf_counter() - started
        self._log(source_name, reply, elapsed, delivery)
        if span is not None:
            event_id = reply.body.get("event_id") or (delivery.event_id if delivery else None)
            tracing.end(
                span,
                {
                    "http.response.status_code": reply.status_code,
                    "messaging.message.id": event_id,
                    "hookinbox.outcome": reply.outcome.value,
                    "hookinbox.event.type": reply.event_type,
                },
                error=_server_error(reply),
            )
        # An unknown source's name comes from the URL: never a metric label (cardinality).
        label = source_name if known else "unknown"
        count_delivery(
            label, reply.event_type, reply.outcome.value, elapsed, key_conflict=reply.key_conflict
        )
        return reply

    def store_attributes(self) -> dict[str, Any]:
        """The `store` span's attributes (the database's semantic conventions)."""
        return {}

    def _verify(
        self,
        source: Source,
        headers: Mapping[str, str],
        body: bytes,
        started: float,
        query: str | bytes | None = None,
    ) -> tuple[Reply, Any] | Verified:
        """The verified delivery, or the reply that ends it here (and its span)."""
        now = self.clock()
        began = time.perf_counter()
        identified = self._authenticate(source, headers, body, now, query)
        span = None
        if tracing.enabled():
            # The spans start now that verification has decided, at the times things
            # happened: the request's own trace context is the parent of a verified
            # delivery only (`tracing.start_receive`).
            ended = time.perf_counter()
            refused = isinstance(identified, Reply) and identified.outcome is not Outcome.HANDSHAKE
            span = tracing.start_receive(
                source.name, headers, len(body), verified=not refused,
                start_time=_wall_ns(started),
            )  # fmt: skip
            verifying = tracing.start_child(
                span, "verify", {"messaging.destination.name": source.name},
                start_time=_wall_ns(began),
            )  # fmt: skip
            error = None
            if isinstance(identified, Reply) and not identified.ok:
                error = identified.outcome.value
            tracing.end(verifying, error=error, end_time=_wall_ns(ended))
        if isinstance(identified, Reply):
            return identified, span
        received_at = datetime.fromtimestamp(now, UTC)
        # The receive span's context goes with the event: its processing continues the trace.
        kept = {**source.headers_to_store(headers), **tracing.carrier_of(span)}
        if isinstance(identified, list):  # a batched delivery: one `NewDelivery` per event
            batch = tuple(
                self._new_delivery(source, identity, body, received_at, kept)
                for identity in identified
            )
            return Verified(batch[0], started, None, batch, span, _span_start(span))
        delivery = self._new_delivery(source, identified, body, received_at, kept)
        return Verified(delivery, started, identified.answer, (), span, _span_start(span))

    def _new_delivery(
        self,
        source: Source,
        identity: Identity,
        body: bytes,
        received_at: datetime,
        headers: dict[str, str],
    ) -> NewDelivery:
        stored_body = body if identity.body is None else identity.body
        stale = (
            self.retention is not None
            and identity.occurred_at is not None
            and identity.occurred_at < received_at - self.retention
        )
        return NewDelivery(
            source=source.name,
            event_id=identity.event_id,
            event_type=identity.event_type,
            occurred_at=identity.occurred_at,
            received_at=received_at,
            body=stored_body,
            headers=headers,
            body_sha256=hashlib.sha256(
                stored_body if identity.fingerprint is None else identity.fingerprint
            ).hexdigest(),
            stale=stale and identity.invalid is None,
            invalid=identity.invalid,
        )

    def _authenticate(
        self,
        source: Source,
        headers: Mapping[str, str],
        body: bytes,
        now: float,
        query: str | bytes | None = None,
    ) -> Identity | list[Identity] | Reply:
        """The source's identity of the delivery (each event's, for a batched source), or the
        reply that ends it here. The query string is parsed only for a source that reads it."""
        try:
            if source.reads_query:
                return self._authenticate_with_query(source, headers, body, now, query)
            if source.batched:
                return list(cast(BatchSource, source).authenticate_batch(headers, body, now=now))
            return source.authenticate(headers, body, now=now)
        except VerificationError as error:
            return _reject(401, Outcome.INVALID_SIGNATURE, error.message)
        except PayloadError as error:
            return _reject(400, Outcome.BAD_REQUEST, error.message)
        except VerificationUnavailable as error:
            return self.unavailable(error.message)
        except DeliveryIgnored:
            return Reply(200, {"status": Outcome.IGNORED.value}, {}, Outcome.IGNORED)
        except Handshake as handshake:
            return _handshake(handshake)

    @staticmethod
    def _authenticate_with_query(
        source: Source,
        headers: Mapping[str, str],
        body: bytes,
        now: float,
        query: str | bytes | None,
    ) -> Identity | list[Identity]:
        """`authenticate` with the parsed query, for a source that reads it (the others, a
        user's own `Source` subclasses among them, are called as they always were)."""
        parsed = parse_query(query)
        if source.batched:
            batch = cast(BatchSource, source)
            return list(batch.authenticate_batch(headers, body, now=now, query=parsed))
        return source.authenticate(headers, body, now=now, query=parsed)

    def _not_processed(self, detail: str) -> Reply:
        body = {"status": "retry", "error": Outcome.NOT_PROCESSED.value, "detail": detail}
        headers = {"retry-after": str(self.retry_after)}
        return Reply(503, body, headers, Outcome.NOT_PROCESSED)

    def _log(
        self, source_name: str, reply: Reply, elapsed: float, delivery: NewDelivery | None = None
    ) -> None:
        level = logging.INFO if reply.ok else logging.WARNING
        if not log.isEnabledFor(level):  # one line per delivery: built only when written
            return
        # A verified delivery names its event even when the answer does not (a 503).
        event_id = reply.body.get("event_id") or (delivery.event_id if delivery else None)
        event_type = reply.event_type or (delivery.event_type if delivery else None)
        fields = {
            "source": source_name,
            "event_id": event_id,
            "event_type": event_type,
            "outcome": reply.outcome.value,
            "status_code": reply.status_code,
            "latency_ms": round(elapsed * 1000, 2),
        }
        detail = reply.body.get("detail", "")
        log.log(
            level,
            "%s %s (%s): %s %d %.1f ms %s",
            source_name,
            event_id or "-",
            event_type or "-",
            reply.outcome.value,
            reply.status_code,
            elapsed * 1000,
            detail,
            extra=fields,
        )


def _wall_ns(perf: float) -> int:
    """A `time.perf_counter()` reading as wall-clock nanoseconds (a span's start or end)."""
    return time.time_ns() - int((time.perf_counter() - perf) * 1e9)


def _span_start(span: Any) -> int:
    """Where the `store` span will start (now), if there is a span to hang it on."""
    return 0 if span is None else time.time_ns()


def _server_error(reply: Reply) -> str | None:
    """A span's error for a 5xx answer (a 4xx is the sender's mistake, not a failure here)."""
    return str(reply.status_code) if reply.status_code >= 500 else None


class Receiver(BaseReceiver):
    """Turns (source name, headers, raw body) into a stored event and a `Reply`."""

    def __init__(
        self,
        store: Store,
        sources: Mapping[str, Source],
        settings: ReceiverSettings | None = None,
        *,
        inline: Mapping[str, InlineProcessor] | None = None,
        on_new_event: Callable[[], None] | None = None,
        retention: timedelta | None = None,
        committer: GroupCommitter | None = None,
    ) -> None:
        self.store = store
        self.sources = sources
        self.settings = settings or ReceiverSettings()
        self.committer = committer
        self.inline = inline or {}
        self.on_new_event = on_new_event
        self.retention = retention

    def ping(self) -> None:
        self.store.ping()

    def store_attributes(self) -> dict[str, Any]:
        return {
            "db.system.name": self.store.dialect.name,
            "db.operation.name": "INSERT",
            "db.collection.name": "hookinbox_events",
        }

    def metrics(self) -> tuple[bytes, str]:
        return exposition(self.store)

    def committer_for(self, verified: Verified) -> GroupCommitter | None:
        """The group committer that stores this delivery, or None to store it in a thread
        of its own (group commit off, or an inline source, whose handlers share the insert's
        transaction)."""
        if verified.delivery.source in self.inline:
            return None
        return self.committer

    def store_verified(self, verified: Verified) -> Reply:
        """The second half of `receive`, for a delivery that `verify` passed (blocking)."""
        try:
            recorded = self._store(verified)
        except Exception as error:
            return self.conclude(verified, error)
        return self.conclude(verified, recorded)

    def conclude(self, verified: Verified, result: Stored | Exception) -> Reply:
        """The reply for a verified delivery once storing it succeeded or raised `result`."""
        return self.finish_verified(verified, self._decide(verified, result))

    def conclude_late(self, verified: Verified, result: object) -> None:
        """A delivery stored (or not) after its 503 went out: the line the log promises."""
        stored = cast(Stored | Exception, result)
        self._log_late(verified.delivery, self._decide(verified, stored))

    def _decide(self, verified: Verified, result: Stored | Exception) -> Reply:
        delivery = verified.delivery
        if isinstance(result, Exception):
            return self._failed(delivery, result)
        if isinstance(result, list):
            return self._stored_batch(verified.batch, result)
        return self._stored(delivery, result)

    def _failed(self, delivery: NewDelivery, error: Exception) -> Reply:
        if isinstance(error, StoreUnavailable):
            return self.unavailable(error.message)
        if isinstance(error, BodyTooLarge):  # more than the database takes in a statement
            return _reject(413, Outcome.TOO_LARGE, error.message)
        if isinstance(error, NotReady):
            return self._not_processed(f"not ready: {error.message}")
        if delivery.source in self.inline:
            log.error(
                "inline handler failed for %s %s",
                delivery.source,
                delivery.event_id,
                exc_info=error,
            )
            return self._not_processed(f"handler raised {type(error).__name__}")
        log.error(
            "unexpected error storing %s %s", delivery.source, delivery.event_id, exc_info=error
        )
        return Reply(500, {"status": "error", "error": "internal"}, {}, Outcome.ERROR)

    def _stored(self, delivery: NewDelivery, recorded: RecordedDelivery) -> Reply:
        self._note(delivery, recorded)
        if recorded.is_new and recorded.status is Status.PENDING and self.on_new_event:
            self.on_new_event()  # wakes a worker running in this process
        outcome = Outcome.ACCEPTED if recorded.is_new else Outcome.DUPLICATE
        body_out = {"status": outcome.value, "event_id": delivery.event_id}
        return Reply(200, body_out, {}, outcome, delivery.event_type, recorded.key_conflict)

    def _stored_batch(
        self, batch: tuple[NewDelivery, ...], results: list[RecordedDelivery]
    ) -> Reply:
        """One answer for a batch: `accepted` when it held any new event, else `duplicate`."""
        for delivery, recorded in zip(batch, results, strict=True):
            self._note(delivery, recorded)
        if self.on_new_event and any(r.is_new and r.status is Status.PENDING for r in results):
            self.on_new_event()
        new = sum(recorded.is_new for recorded in results)
        conflict = any(recorded.key_conflict for recorded in results)
        invalid = sum(delivery.invalid is not None for delivery in batch)
        return batch_reply(len(results), new, conflict, invalid)

    def _note(self, delivery: NewDelivery, recorded: RecordedDelivery) -> None:
        """Log what an operator should hear of: a key conflict, an event held as stale."""
        if recorded.key_conflict:
            log.warning(
                "key conflict: %s %s delivered again with a different body",
                delivery.source,
                delivery.event_id,
                extra={"source": delivery.source, "event_id": delivery.event_id},
            )
        if recorded.is_new and recorded.status is Status.STALE:
            log.warning(
                "%s %s occurred %s, before the retention: held as stale for an operator",
                delivery.source,
                delivery.event_id,
                delivery.occurred_at,
            )
        if recorded.is_new and recorded.status is Status.INVALID:
            log.warning(
                "%s %s: an event of a batch cannot be processed (%s): held as invalid for an "
                "operator, the rest of the batch stored",
                delivery.source,
                delivery.event_id,
                delivery.invalid,
                extra={"source": delivery.source, "event_id": delivery.event_id},
            )

    def _store(self, verified: Verified) -> Stored:
        delivery = verified.delivery
        process = self.inline.get(delivery.source)
        if verified.batch:
            return self._store_batch(verified, process)
        if process is None:
            if self.committer is not None:
                late = partial(self.conclude_late, verified)
                return self.committer.record(delivery, self.time_left(verified), late=late)
            return self.store.ingest.record(delivery)
        # Inline: insert, handlers and processed mark share one transaction, so a handler that
        # fails leaves no claim behind and the provider's retry is treated as new.
        with self.store.transaction() as connection:
            recorded = self.store.ingest.record_on(connection, delivery)
            if recorded.is_new and not delivery.stale:
                process(connection, _inline_event(delivery, recorded))
            return recorded

    def _store_batch(
        self, verified: Verified, process: InlineProcessor | None
    ) -> list[RecordedDelivery]:
        """Every event of a batch in one transaction: all of them are stored, or none."""
        if process is None and self.committer is not None:
            late = partial(self.conclude_late, verified)
            return self.committer.record_batch(verified.batch, self.time_left(verified), late=late)
        batch = verified.batch
        # In key order, as group commit writes: two transactions storing one batch (its
        # redelivery, on another server) lock its rows in the same order, so one waits for
        # the other instead of deadlocking.
        order = sorted(range(len(batch)), key=lambda i: (batch[i].source, batch[i].event_id))

        def write() -> list[RecordedDelivery]:
            results: list[RecordedDelivery | None] = [None] * len(batch)
            with self.store.transaction() as connection:
                for index in order:
                    results[index] = self.store.ingest.record_on(connection, batch[index])
                if process is not None:
                    for delivery, recorded in zip(batch, results, strict=True):
                        assert recorded is not None
                        if recorded.is_new and recorded.status is Status.PENDING:
                            process(connection, _inline_event(delivery, recorded))
            return [recorded for recorded in results if recorded is not None]

        if process is not None:
            # The handlers' writes share the transaction: a deadlock is a 503, and the
            # provider's retry runs them again, not this request.
            return write()
        return self.store.retry_deadlocks(write, "ingest")


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


def _inline_event(delivery: NewDelivery, recorded: RecordedDelivery) -> Event:
    return event_of(delivery, row_id=recorded.row_id, delivery_count=recorded.delivery_count)


def event_of(delivery: NewDelivery, *, row_id: int, delivery_count: int) -> Event:
    """The event handlers see for a delivery they handle in the request (attempt 1)."""
    return Event(
        row_id=row_id,
        source=delivery.source,
        id=delivery.event_id,
        type=delivery.event_type,
        occurred_at=delivery.occurred_at,
        received_at=delivery.received_at,
        body=delivery.body,
        headers=delivery.headers,
        status=Status.PROCESSING,
        attempts=1,
        delivery_count=delivery_count,
    )
