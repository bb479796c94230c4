"""The verify step: a source judges the raw bytes, and a judged delivery becomes events to store.

Pure of storage and HTTP: the source's verdict (an identity, a batch's identities, or why not)
becomes a `Verified` delivery, or the reply that ends the request here (401, 400, a handshake's
answer, 503 when the provider cannot be asked). The spans start once verification has decided,
at the times things happened.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from hookinbox import _tracing as tracing
from hookinbox._errors import (
    DeliveryIgnored,
    Handshake,
    PayloadError,
    VerificationError,
    VerificationUnavailable,
)
from hookinbox._model import NewDelivery
from hookinbox._receiver._reply import (
    Outcome,
    Reply,
    handshake_reply,
    reject,
    unavailable,
)
from hookinbox._receiver._report import span_start, wall_ns
from hookinbox._receiver._verified import Verified
from hookinbox._settings import ReceiverSettings
from hookinbox.sources import Identity, Source
from hookinbox.sources._base import BatchSource
from hookinbox.sources._handshakes import parse_query

if TYPE_CHECKING:
    from hookinbox._storage import GroupCommitter


def verify_delivery(
    source: Source,
    headers: Mapping[str, str],
    body: bytes,
    started: float,
    query: str | bytes | None,
    settings: ReceiverSettings,
    retention: timedelta | None,
    committer: GroupCommitter | None,
) -> tuple[Reply, Any] | Verified:
    """The verified delivery (stored through `committer`, or in a transaction of its own when
    None), or the reply that ends it here and its span."""
    now = settings.clock()
    began = time.perf_counter()
    identified = identify(source, headers, body, now, query, settings)
    span = None
    if tracing.enabled():
        # The spans start now that verification has decided, at the times things
        # happened: the request's own trace context is the parent of a verified
        # delivery only (`tracing.start_receive`).
        ended = time.perf_counter()
        refused = isinstance(identified, Reply) and identified.outcome is not Outcome.HANDSHAKE
        span = tracing.start_receive(
            source.name, headers, len(body), verified=not refused, start_time=wall_ns(started)
        )
        verifying = tracing.start_child(
            span, "verify", {"messaging.destination.name": source.name},
            start_time=wall_ns(began),
        )  # fmt: skip
        error = None
        if isinstance(identified, Reply) and not identified.ok:
            error = identified.outcome.value
        tracing.end(verifying, error=error, end_time=wall_ns(ended))
    if isinstance(identified, Reply):
        return identified, span
    received_at = datetime.fromtimestamp(now, UTC)
    # The receive span's context goes with the event: its processing continues the trace.
    kept = {**source.headers_to_store(headers), **tracing.carrier_of(span)}
    if isinstance(identified, list):  # a batched delivery: one `NewDelivery` per event
        batch = tuple(
            new_delivery(source, identity, body, received_at, kept, retention)
            for identity in identified
        )
        return Verified(batch[0], started, None, batch, span, span_start(span), committer)
    delivery = new_delivery(source, identified, body, received_at, kept, retention)
    return Verified(delivery, started, identified.answer, (), span, span_start(span), committer)


def identify(
    source: Source,
    headers: Mapping[str, str],
    body: bytes,
    now: float,
    query: str | bytes | None,
    settings: ReceiverSettings,
) -> Identity | list[Identity] | Reply:
    """The source's identity of the delivery (each event's, for a batched source), or the
    reply that ends it here. The query string is parsed only for a source that reads it."""
    try:
        if source.reads_query:
            return _identify_with_query(source, headers, body, now, query)
        if source.batched:
            return list(cast(BatchSource, source).authenticate_batch(headers, body, now=now))
        return source.authenticate(headers, body, now=now)
    except VerificationError as error:
        return reject(401, Outcome.INVALID_SIGNATURE, error.message)
    except PayloadError as error:
        return reject(400, Outcome.BAD_REQUEST, error.message)
    except VerificationUnavailable as error:
        return unavailable(error.message, settings.retry_after)
    except DeliveryIgnored:
        return Reply(200, {"status": Outcome.IGNORED.value}, {}, Outcome.IGNORED)
    except Handshake as handshake:
        return handshake_reply(handshake)


def _identify_with_query(
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


def new_delivery(
    source: Source,
    identity: Identity,
    body: bytes,
    received_at: datetime,
    headers: dict[str, str],
    retention: timedelta | None,
) -> NewDelivery:
    """One event to store: its key, the bytes kept (the event's own slice of a batch), the
    digest a redelivery is compared on, and whether it is older than the retention."""
    stored_body = body if identity.body is None else identity.body
    stale = (
        retention is not None
        and identity.occurred_at is not None
        and identity.occurred_at < received_at - retention
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
