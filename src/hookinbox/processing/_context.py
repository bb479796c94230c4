"""What a handler receives besides the event: `ctx.db`, `ctx.ordering`, `ctx.attempt`, `ctx.log`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection

from hookinbox._model import Event
from hookinbox.storage import advance_ordering

log = logging.getLogger("hookinbox.handler")


class Ordering:
    """The ordering guard for "last write wins" objects (seed 000: updates arrive out of order).

    `ctx.ordering.advance("stripe:subscription:sub_1", event.payload["created"])` records this
    event's position for the object and returns True, unless an event with a greater position
    was already applied: then it records nothing and returns False, and the handler should skip
    its stale update. Equal positions apply (providers stamp seconds; two updates in one second
    cannot be ordered, so neither is dropped). It runs in the handler's transaction: a handler
    that later fails leaves no mark, and concurrent events for one object serialise on its row.
    """

    def __init__(self, connection: Connection, event: Event, clock: Callable[[], float]) -> None:
        self._connection = connection
        self._event = event
        self._clock = clock

    def advance(self, key: str, position: int | datetime) -> bool:
        if isinstance(position, datetime):
            if position.tzinfo is None:
                raise ValueError("ordering positions must be aware datetimes or integers")
            position = round(position.timestamp() * 1_000_000)
        elif isinstance(position, bool) or not isinstance(position, int):
            raise TypeError("an ordering position is an int (a version, a Unix time) or a datetime")
        return advance_ordering(
            self._connection,
            object_key=key,
            position=position,
            source=self._event.source,
            event_id=self._event.id,
            now=datetime.fromtimestamp(self._clock(), UTC),
        )


@dataclass(frozen=True)
class HandlerContext:
    """Passed to every handler as its second argument."""

    db: Connection
    """The connection of the transaction that also marks the event processed."""
    event: Event
    ordering: Ordering
    attempt: int
    """1 on the first attempt."""
    log: logging.LoggerAdapter[logging.Logger]
    """A logger whose lines carry the event's source, id and type."""


def handler_context(
    connection: Connection, event: Event, clock: Callable[[], float]
) -> HandlerContext:
    fields = {"source": event.source, "event_id": event.id, "event_type": event.type}
    return HandlerContext(
        db=connection,
        event=event,
        ordering=Ordering(connection, event, clock),
        attempt=event.attempts,
        log=logging.LoggerAdapter(log, fields),
    )
