"""The outbox gateway (`Store.outbox`): messages written in a handler's transaction, and what
operators read of them. The relay's queue of them is `Store.messages` (`_queue.py`).

A message is delivered at least once, so the relay's attempt is not a transaction with the
delivery (an HTTP call cannot be rolled back): the lease commits first (`attempts + 1`, a
token), the destination is called, and the result is recorded afterwards, if the lease is
still ours. A relay killed in between leaves the message leased until its lease expires; the
next lease then takes it back, and it is sent again under the same key.

Messages that share an ordering key go one at a time, oldest first: a message is only due when
no older message with its key is still unsent.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import MessageStatus
from hookinbox._storage._rows import MESSAGE_HELD, MESSAGE_STATUS
from hookinbox._storage._schema import outbox, outbox_queue

if TYPE_CHECKING:
    from datetime import datetime

    from hookinbox._storage._seam import StoreSeam

_LIVE = {
    "status": MESSAGE_STATUS,
    # While the message is not delivered, its queue row has the live count (schema 15).
    "attempts": sa.func.coalesce(outbox_queue.c.attempts, outbox.c.attempts).label("attempts"),
    "next_attempt_at": sa.func.coalesce(
        outbox_queue.c.next_attempt_at, outbox.c.next_attempt_at
    ).label("next_attempt_at"),
    "lease_expires_at": outbox_queue.c.lease_expires_at.label("lease_expires_at"),
}
MESSAGE_COLUMNS = [
    _LIVE.get(c.name, c) for c in outbox.c if c.name not in ("payload", "lease_token")
]
_WITH_QUEUE = outbox.outerjoin(outbox_queue, outbox_queue.c.id == outbox.c.id)
_BACKLOG_STATUS = sa.case(
    (MESSAGE_HELD, sa.literal(MessageStatus.DELIVERING.value)), else_=outbox_queue.c.state
).label("status")


class Outbox:
    """Enqueue in the caller's transaction; the backlog and an event's messages."""

    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def enqueue(
        self,
        connection: Connection,
        *,
        destination: str,
        key: str,
        payload: Any,
        ordering_key: str | None,
        source: str | None,
        event_id: str | None,
        now: datetime,
        trace_context: str | None = None,
    ) -> bool:
        """Add a message in the caller's transaction; False if (destination, key) exists."""
        statement = (
            self.store.dialect.insert(outbox)
            .values(
                destination=destination,
                message_key=key,
                ordering_key=ordering_key,
                payload=json.dumps(payload, sort_keys=True, default=str),
                source=source,
                event_id=event_id,
                status=MessageStatus.PENDING.value,
                attempts=0,
                next_attempt_at=now,
                created_at=now,
                trace_context=trace_context,
            )
            .on_conflict_do_nothing(index_elements=[outbox.c.destination, outbox.c.message_key])
            .returning(outbox.c.id)
        )
        return connection.execute(statement).first() is not None

    def backlog(self, connection: Connection) -> dict[str, int]:
        """Unsent and failed messages, by status (the relay's small queue table): one a relay
        holds counts as `delivering`."""
        rows = connection.execute(
            sa.select(_BACKLOG_STATUS, sa.func.count()).group_by(_BACKLOG_STATUS)
        )
        return {status: int(count) for status, count in rows}

    def for_event(self, source: str, event_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """The outbox messages an event's handlers wrote, oldest first (at most `limit`)."""
        query = (
            sa.select(*MESSAGE_COLUMNS)
            .select_from(_WITH_QUEUE)
            .where(outbox.c.source == source, outbox.c.event_id == event_id)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        with self.store.reading() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]
