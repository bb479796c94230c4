"""The outbox's queries: enqueue in the handler's transaction; lease, settle, sweep for the relay.

A message is delivered at least once, so the relay's attempt is not a transaction with the
delivery (an HTTP call cannot be rolled back): the lease commits first (`attempts + 1`,
`delivering`), the destination is called, and the result is recorded afterwards, if the lease is
still ours. A relay killed in between leaves the message `delivering` until its lease expires;
the sweeper then makes it pending again, and it is sent again under the same key.

Messages that share an ordering key go one at a time, oldest first: a message is only due when
no older message with its key is still pending or being delivered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import Message, MessageStatus
from hookinbox._storage._dialects import dialect_named
from hookinbox._storage._leases import LeasedQueue
from hookinbox._storage._schema import outbox, status_is, status_not
from hookinbox._storage._store import Store

_UNSENT = [MessageStatus.PENDING.value, MessageStatus.DELIVERING.value]


@dataclass(frozen=True, slots=True)
class LeasedMessage:
    message: Message
    token: str
    expires_at: datetime
    trace_context: str | None = None
    """The sending handler's trace context (JSON), for the relay's span."""


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a delivery attempt ends."""

    status: MessageStatus
    next_attempt_at: datetime
    last_error: str | None = None


def enqueue(
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
    """Add a message in the caller's transaction; False if (destination, key) already exists."""
    statement = (
        dialect_named(connection.dialect.name)
        .insert(outbox)
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


def _ordered(_now: datetime) -> list[sa.ColumnElement[bool]]:
    """A message with an ordering key is due only when no older one with its key is unsent."""
    earlier = outbox.alias("earlier")
    predecessor_unsent = (
        sa.select(earlier.c.id)
        .where(
            earlier.c.ordering_key == outbox.c.ordering_key,
            earlier.c.id < outbox.c.id,
            status_is(earlier.c.status, *_UNSENT),
        )
        .exists()
    )
    return [sa.or_(outbox.c.ordering_key.is_(None), ~predecessor_unsent)]


MESSAGES = LeasedQueue(
    outbox, (MessageStatus.PENDING.value,), MessageStatus.DELIVERING.value, _ordered
)
"""The outbox's queue (`_leases.py` holds the SQL it shares with the event queue's)."""


def has_message_due(store: Store, now: datetime) -> bool:
    return MESSAGES.has_due(store, now)


def next_message_due_at(store: Store) -> datetime | None:
    return MESSAGES.next_due_at(store)


def lease_messages(
    store: Store, *, limit: int, now: datetime, lease_until: datetime
) -> list[LeasedMessage]:
    token, rows = MESSAGES.lease(store, limit=limit, now=now, until=lease_until)
    return [
        LeasedMessage(message_from_row(row), token, lease_until, row["trace_context"])
        for row in rows
    ]


def settle(store: Store, leased: LeasedMessage, settlement: Settlement, now: datetime) -> bool:
    """Record how the attempt ended, if the lease is still ours; True when it was."""
    values: dict[str, object] = {
        "status": settlement.status.value,
        "next_attempt_at": settlement.next_attempt_at,
        "last_error": settlement.last_error,
    }
    if settlement.status is MessageStatus.DELIVERED:
        values["delivered_at"] = now
    with store.transaction() as connection:
        return MESSAGES.settle(connection, leased.message.row_id, leased.token, values)


def sweep_messages(
    store: Store, *, now: datetime, decide: Callable[[Message], Settlement], limit: int = 100
) -> Sequence[Message]:
    """Give back messages whose relay died while delivering them (their lease expired)."""

    def values(row: sa.RowMapping) -> dict[str, object]:
        decision = decide(message_from_row(row))
        return {
            "status": decision.status.value,
            "next_attempt_at": decision.next_attempt_at,
            "last_error": decision.last_error,
        }

    rows = MESSAGES.sweep(store, now=now, decide=values, limit=limit)
    return [message_from_row(row) for row in rows]


def message_from_row(row: sa.RowMapping) -> Message:
    return Message(
        row_id=row["id"],
        destination=row["destination"],
        key=row["message_key"],
        payload=json.loads(row["payload"]),
        ordering_key=row["ordering_key"],
        source=row["source"],
        event_id=row["event_id"],
        attempts=row["attempts"],
        created_at=row["created_at"],
    )


def outbox_backlog(connection: Connection) -> dict[str, int]:
    """Unsent and failed messages, by status (from the small partial indexes)."""
    rows = connection.execute(
        sa.select(outbox.c.status, sa.func.count())
        .where(
            status_is(outbox.c.status, *_UNSENT, MessageStatus.FAILED.value),
            status_not(outbox.c.status, MessageStatus.DELIVERED.value),  # the open index's
        )
        .group_by(outbox.c.status)
    )
    return {status: int(count) for status, count in rows}
