"""What a handler gets besides the event: `ctx.db`, `.ordering`, `.outbox`, `.attempt`, `.log`.

One context per way of waiting: `HandlerContext` (a sync `Connection`) and, for `async def`
handlers on an async database URL, `AsyncHandlerContext` (an `AsyncConnection`, whose
`ordering` and `outbox` are awaited). The rules (an ordering position, an outbox key) are
written once, in the bases; only the call to the database differs.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Connection

from hookinbox import _tracing as tracing
from hookinbox._errors import ConfigurationError
from hookinbox._logging import logger
from hookinbox._model import MAX_KEY_LENGTH, Event

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    from hookinbox._processing._service import Processing

log = logger("hookinbox.handler")


class _OrderingBase:
    """The ordering guard for "last write wins" objects (seed 000: updates arrive out of order).

    `ctx.ordering.advance("stripe:subscription:sub_1", event.payload["created"])` records this
    event's position for the object and returns True, unless an event with a greater position
    was already applied: then it records nothing and returns False, and the handler should skip
    its stale update. Equal positions apply (providers stamp seconds; two updates in one second
    cannot be ordered, so neither is dropped). It runs in the handler's transaction: a handler
    that later fails leaves no mark, and concurrent events for one object serialise on its row.
    """

    def __init__(self, processing: Processing, event: Event, clock: Callable[[], float]) -> None:
        self._processing = processing
        self._event = event
        self._clock = clock

    def _advance(self, connection: Connection, key: str, position: int | datetime) -> bool:
        if isinstance(position, datetime):
            if position.tzinfo is None:
                raise ValueError("ordering positions must be aware datetimes or integers")
            position = round(position.timestamp() * 1_000_000)
        elif isinstance(position, bool) or not isinstance(position, int):
            raise TypeError("an ordering position is an int (a version, a Unix time) or a datetime")
        return self._processing.advance(
            connection,
            object_key=key,
            position=position,
            source=self._event.source,
            event_id=self._event.id,
            now=datetime.fromtimestamp(self._clock(), UTC),
        )


class Ordering(_OrderingBase):
    __doc__ = _OrderingBase.__doc__

    def __init__(
        self,
        processing: Processing,
        connection: Connection,
        event: Event,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(processing, event, clock)
        self._connection = connection

    def advance(self, key: str, position: int | datetime) -> bool:
        return self._advance(self._connection, key, position)


class AsyncOrdering(_OrderingBase):
    __doc__ = (
        (_OrderingBase.__doc__ or "")
        + """
    On an async inbox: `await ctx.ordering.advance(key, position)`.
    """
    )

    def __init__(
        self,
        processing: Processing,
        connection: AsyncConnection,
        event: Event,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(processing, event, clock)
        self._connection = connection

    async def advance(self, key: str, position: int | datetime) -> bool:
        return await self._connection.run_sync(self._advance, key, position)


class _OutboxBase:
    """`ctx.outbox.send(...)`: side effects that leave the database, written in its transaction.

    The message is a row in `hookinbox_outbox`, inserted on `ctx.db`: if the handler rolls back,
    the message never existed; if it commits, it exists once, and the relay delivers it at least
    once. The key is unique per destination and defaults to one derived from the event's source
    and id, the handler and a counter, so a retried handler writes the same keys and a receiver
    deduplicating by `Idempotency-Key` applies each message once.
    """

    def __init__(
        self,
        processing: Processing,
        event: Event,
        handler_name: str,
        destinations: Collection[str],
        clock: Callable[[], float],
    ) -> None:
        self._processing = processing
        self._event = event
        self._handler_name = handler_name
        self._destinations = destinations
        self._clock = clock
        self._counter = 0
        self.sent = 0

    def _enqueue(
        self,
        connection: Connection,
        destination: str,
        payload: Any,
        key: str | None,
        ordering_key: str | None,
    ) -> str:
        if destination not in self._destinations:
            raise ConfigurationError(f"no outbox destination named {destination!r}")
        self._counter += 1
        if key is None:
            key = f"{self._event.source}:{self._event.id}:{self._handler_name}:{self._counter}"
            if len(key) > MAX_KEY_LENGTH:
                key = hashlib.sha256(key.encode()).hexdigest()
        elif not key or len(key) > MAX_KEY_LENGTH:
            raise ValueError(f"an outbox key is 1 to {MAX_KEY_LENGTH} characters")
        if ordering_key is not None and not 0 < len(ordering_key) <= MAX_KEY_LENGTH:
            # Checked here, not by the column: MariaDB's INSERT IGNORE would cut it short.
            raise ValueError(f"an outbox ordering key is 1 to {MAX_KEY_LENGTH} characters")
        self._processing.enqueue(
            connection,
            destination=destination,
            key=key,
            payload=json.loads(json.dumps(payload, default=_json_default)),
            ordering_key=ordering_key,
            source=self._event.source,
            event_id=self._event.id,
            now=datetime.fromtimestamp(self._clock(), UTC),
            trace_context=tracing.current_carrier(),  # the handler's span, when tracing
        )
        self.sent += 1
        return key


class Outbox(_OutboxBase):
    __doc__ = _OutboxBase.__doc__

    def __init__(
        self,
        processing: Processing,
        connection: Connection,
        event: Event,
        handler_name: str,
        destinations: Collection[str],
        clock: Callable[[], float],
    ) -> None:
        super().__init__(processing, event, handler_name, destinations, clock)
        self._connection = connection

    def send(
        self,
        destination: str,
        payload: Any,
        *,
        key: str | None = None,
        ordering_key: str | None = None,
    ) -> str:
        """Queue `payload` (JSON-serialisable) for `destination`; returns the message key.

        Messages with the same `ordering_key` are delivered one at a time, in the order sent.
        """
        return self._enqueue(self._connection, destination, payload, key, ordering_key)


class AsyncOutbox(_OutboxBase):
    __doc__ = (
        (_OutboxBase.__doc__ or "")
        + """
    On an async inbox: `await ctx.outbox.send(...)`.
    """
    )

    def __init__(
        self,
        processing: Processing,
        connection: AsyncConnection,
        event: Event,
        handler_name: str,
        destinations: Collection[str],
        clock: Callable[[], float],
    ) -> None:
        super().__init__(processing, event, handler_name, destinations, clock)
        self._connection = connection

    async def send(
        self,
        destination: str,
        payload: Any,
        *,
        key: str | None = None,
        ordering_key: str | None = None,
    ) -> str:
        """Queue `payload` (JSON-serialisable) for `destination`; returns the message key.

        Messages with the same `ordering_key` are delivered one at a time, in the order sent.
        """
        return await self._connection.run_sync(
            self._enqueue, destination, payload, key, ordering_key
        )


def _json_default(value: object) -> object:
    """Datetimes, dates, decimals and UUIDs as strings; anything else is a handler bug."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal | UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable for the outbox")


@dataclass(frozen=True)
class HandlerContext:
    """Passed to every handler as its second argument."""

    db: Connection
    """The connection of the transaction that also marks the event processed."""
    event: Event
    ordering: Ordering
    attempt: int
    """1 on the first attempt; counts on across replays (`event.attempts_since_replay` is the
    current run's)."""
    log: logging.LoggerAdapter[logging.Logger]
    """A logger whose lines carry the event's source, id and type."""
    outbox: Outbox
    """Messages for destinations outside the database, sent in this transaction."""


@dataclass(frozen=True)
class AsyncHandlerContext:
    """Passed to every `async def` handler of an inbox on an async database URL.

    `db` is the `AsyncConnection` of the transaction that also marks the event processed:
    whatever is written on it, or through an `AsyncSession` bound to it (`session()`), commits
    with the claim or rolls back with it. `ordering.advance` and `outbox.send` are awaited.
    """

    db: AsyncConnection
    """The connection of the transaction that also marks the event processed."""
    event: Event
    ordering: AsyncOrdering
    attempt: int
    """1 on the first attempt; counts on across replays (`event.attempts_since_replay` is the
    current run's)."""
    log: logging.LoggerAdapter[logging.Logger]
    """A logger whose lines carry the event's source, id and type."""
    outbox: AsyncOutbox
    """Messages for destinations outside the database, sent in this transaction."""

    def session(self, **options: Any) -> AsyncSession:
        """An `AsyncSession` on `db`, inside the processing transaction: `async with
        ctx.session() as session:` gives repositories written for an `AsyncSession` a place in
        the claim's transaction.

        The session behaves as any session does, inside the processing transaction: its
        own SAVEPOINT (SQLAlchemy's `join_transaction_mode="create_savepoint"`) holds what
        it writes; `await session.commit()` keeps it, for the event's commit to make
        durable (or its rollback to undo, with the claim); a session closed without
        committing, or rolled back, or whose flush failed, drops its own writes only. An
        `IntegrityError` of a business key still reaches the handler's caller. Objects are
        not expired by `commit()` (`expire_on_commit=False`: reading one afterwards needs
        no lazy load, which an async session cannot do). `options` go to `AsyncSession` as
        they are; a factory the application already has joins the same way with
        `maker(bind=ctx.db, join_transaction_mode="create_savepoint")`.
        """
        from sqlalchemy.ext.asyncio import AsyncSession

        defaults = {"expire_on_commit": False, "join_transaction_mode": "create_savepoint"}
        return AsyncSession(bind=self.db, **{**defaults, **options})


def _fields(event: Event) -> dict[str, Any]:
    return {"source": event.source, "event_id": event.id, "event_type": event.type}


def handler_context(
    processing: Processing,
    connection: Connection,
    event: Event,
    handler_name: str,
    destinations: Collection[str],
    clock: Callable[[], float],
) -> HandlerContext:
    return HandlerContext(
        db=connection,
        event=event,
        ordering=Ordering(processing, connection, event, clock),
        attempt=event.attempts,
        log=logging.LoggerAdapter(log, _fields(event)),
        outbox=Outbox(processing, connection, event, handler_name, destinations, clock),
    )


def async_handler_context(
    processing: Processing,
    connection: AsyncConnection,
    event: Event,
    handler_name: str,
    destinations: Collection[str],
    clock: Callable[[], float],
) -> AsyncHandlerContext:
    return AsyncHandlerContext(
        db=connection,
        event=event,
        ordering=AsyncOrdering(processing, connection, event, clock),
        attempt=event.attempts,
        log=logging.LoggerAdapter(log, _fields(event)),
        outbox=AsyncOutbox(processing, connection, event, handler_name, destinations, clock),
    )
