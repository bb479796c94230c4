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
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql, sqlite

from hookinbox._model import Message, MessageStatus
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
    insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    statement = (
        insert(outbox)
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


def _due(now: datetime) -> list[sa.ColumnElement[bool]]:
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
    return [
        status_is(outbox.c.status, MessageStatus.PENDING.value),
        outbox.c.next_attempt_at <= now,
        sa.or_(outbox.c.ordering_key.is_(None), ~predecessor_unsent),
    ]


def has_message_due(store: Store, now: datetime) -> bool:
    with store.reading() as connection:
        query = sa.select(outbox.c.id).where(*_due(now)).limit(1)
        return connection.execute(query).first() is not None


def next_message_due_at(store: Store) -> datetime | None:
    query = sa.select(sa.func.min(outbox.c.next_attempt_at)).where(
        status_is(outbox.c.status, MessageStatus.PENDING.value)
    )
    with store.reading() as connection:
        value = connection.execute(query).scalar()
    return value if isinstance(value, datetime) else None


def lease_messages(
    store: Store, *, limit: int, now: datetime, lease_until: datetime
) -> list[LeasedMessage]:
    token = uuid.uuid4().hex
    candidates = (
        sa.select(outbox.c.id)
        .where(*_due(now))
        .order_by(outbox.c.next_attempt_at, outbox.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    with store.transaction() as connection:
        ids = list(connection.execute(candidates).scalars())
        if not ids:
            return []
        connection.execute(
            outbox.update()
            .where(outbox.c.id.in_(ids))
            .values(
                status=MessageStatus.DELIVERING.value,
                attempts=outbox.c.attempts + 1,
                lease_token=token,
                lease_expires_at=lease_until,
            )
        )
        rows = connection.execute(
            sa.select(outbox).where(outbox.c.id.in_(ids)).order_by(outbox.c.id)
        ).mappings()
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
        "lease_token": None,
        "lease_expires_at": None,
    }
    if settlement.status is MessageStatus.DELIVERED:
        values["delivered_at"] = now
    with store.transaction() as connection:
        result = connection.execute(
            outbox.update()
            .where(
                outbox.c.id == leased.message.row_id,
                outbox.c.lease_token == leased.token,
                status_is(outbox.c.status, MessageStatus.DELIVERING.value),
            )
            .values(**values)
        )
        return result.rowcount == 1


def sweep_messages(
    store: Store, *, now: datetime, decide: Callable[[Message], Settlement], limit: int = 100
) -> Sequence[Message]:
    """Give back messages whose relay died while delivering them (their lease expired)."""
    expired = (
        sa.select(outbox)
        .where(
            status_is(outbox.c.status, MessageStatus.DELIVERING.value),
            outbox.c.lease_expires_at < now,
        )
        .order_by(outbox.c.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    swept: list[Message] = []
    with store.transaction() as connection:
        for row in connection.execute(expired).mappings().all():
            message = message_from_row(row)
            decision = decide(message)
            connection.execute(
                outbox.update()
                .where(outbox.c.id == message.row_id, outbox.c.lease_token == row["lease_token"])
                .values(
                    status=decision.status.value,
                    next_attempt_at=decision.next_attempt_at,
                    last_error=decision.last_error,
                    lease_token=None,
                    lease_expires_at=None,
                )
            )
            swept.append(message)
    return swept


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
