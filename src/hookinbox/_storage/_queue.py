"""The worker's queries: lease due events, claim one, and record how its attempt ended.

The life of one attempt takes two transactions:

1. `lease_due` (short, committed at once): due events become `processing` with a lease token,
   an expiry and `attempts + 1`. The attempt is durable before any handler runs, so an event
   that kills its worker every time still runs out of attempts. On PostgreSQL the candidates are
   picked `FOR UPDATE SKIP LOCKED`, so concurrent workers take different events without waiting.
2. `claim` opens the processing transaction with a conditional update on (id, lease token,
   status): the first statement moves the event to its final status and locks the row; the
   handlers' writes follow on the same connection and everything commits together. A worker
   whose lease was swept and re-leased matches no row and runs nothing.

When an attempt fails, `release` puts the event back (pending, deferred) or ends it (failed),
again only if the lease is still the caller's. `sweep_expired` returns events whose worker
vanished: their lease expired while they were still `processing`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import WAITING_STATUSES, Event, Status
from hookinbox._storage._schema import events, status_is
from hookinbox._storage._store import Store, event_from_row

_WAITING = [s.value for s in WAITING_STATUSES]


@dataclass(frozen=True, slots=True)
class Leased:
    """An event held by one worker until `expires_at`."""

    event: Event
    token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Release:
    """How an unsuccessful attempt leaves the event."""

    status: Status
    next_attempt_at: datetime
    last_error: str | None
    outcome: str | None = None
    refund_attempt: bool = False
    """NotReady costs no attempt: the one counted at lease time is given back."""
    deferred_since: datetime | None = None
    count_deferral: bool = False


def has_due(store: Store, now: datetime) -> bool:
    """A cheap read (no write lock on SQLite): is any event due?"""
    query = (
        sa.select(events.c.id)
        .where(status_is(events.c.status, *_WAITING), events.c.next_attempt_at <= now)
        .limit(1)
    )
    with store.reading() as connection:
        return connection.execute(query).first() is not None


def next_due_at(store: Store) -> datetime | None:
    """When the soonest waiting event becomes due (to sleep exactly that long)."""
    soonest = sa.func.min(events.c.next_attempt_at)
    query = sa.select(soonest).where(status_is(events.c.status, *_WAITING))
    with store.reading() as connection:
        value = connection.execute(query).scalar()
    return value if isinstance(value, datetime) else None


def lease_due(store: Store, *, limit: int, now: datetime, lease_until: datetime) -> list[Leased]:
    """Lease up to `limit` due events, oldest due first, counting one attempt each."""
    token = uuid.uuid4().hex
    candidates = (
        sa.select(events.c.id)
        .where(status_is(events.c.status, *_WAITING), events.c.next_attempt_at <= now)
        .order_by(events.c.next_attempt_at, events.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)  # PostgreSQL only; SQLite has one writer anyway
    )
    with store.transaction() as connection:
        ids = list(connection.execute(candidates).scalars())
        if not ids:
            return []
        connection.execute(
            events.update()
            .where(events.c.id.in_(ids))
            .values(
                status=Status.PROCESSING.value,
                attempts=events.c.attempts + 1,
                lease_token=token,
                lease_expires_at=lease_until,
            )
        )
        rows = connection.execute(
            sa.select(events).where(events.c.id.in_(ids)).order_by(events.c.next_attempt_at)
        ).mappings()
        return [Leased(event_from_row(row), token, lease_until) for row in rows]


def _held(row_id: int, token: str) -> sa.ColumnElement[bool]:
    return sa.and_(
        events.c.id == row_id,
        events.c.lease_token == token,
        status_is(events.c.status, Status.PROCESSING.value),
    )


def claim(connection: Connection, leased: Leased, status: Status, now: datetime) -> bool:
    """First statement of the processing transaction: move the event to its final status.

    True when the lease was still ours; the row stays locked until the transaction ends.
    """
    result = connection.execute(
        events.update()
        .where(_held(leased.event.row_id, leased.token))
        .values(status=status.value, lease_token=None, lease_expires_at=None, processed_at=now)
    )
    return result.rowcount == 1


def set_outcome(connection: Connection, row_id: int, outcome: str) -> None:
    """Last statement of the processing transaction.

    It fails loudly when an earlier statement aborted the transaction (a PostgreSQL error a
    handler caught and ignored), instead of letting a silent rollback pass for a commit.
    """
    result = connection.execute(
        events.update()
        .where(events.c.id == row_id)
        .values(outcome=outcome, last_error=None, deferred_since=None)
    )
    if result.rowcount != 1:
        raise RuntimeError(f"event row {row_id} vanished inside its processing transaction")


def release(store: Store, leased: Leased, release: Release) -> bool:
    """End an unsuccessful attempt, if the lease is still ours; True when it was."""
    values: dict[str, object] = {
        "status": release.status.value,
        "next_attempt_at": release.next_attempt_at,
        "last_error": release.last_error,
        "outcome": release.outcome,
        "lease_token": None,
        "lease_expires_at": None,
    }
    if release.refund_attempt:
        values["attempts"] = events.c.attempts - 1
    if release.deferred_since is not None:
        values["deferred_since"] = release.deferred_since
    if release.count_deferral:
        values["deferrals"] = events.c.deferrals + 1
    with store.transaction() as connection:
        updated = connection.execute(
            events.update().where(_held(leased.event.row_id, leased.token)).values(**values)
        )
        return updated.rowcount == 1


def sweep_expired(
    store: Store, *, now: datetime, decide: Callable[[Event], Release], limit: int = 100
) -> Sequence[Event]:
    """Give back events whose lease expired while `processing` (their worker died).

    On PostgreSQL an event whose processing transaction is still open is row-locked and
    skipped, so a slow handler is never swept from under its worker.
    """
    expired = (
        sa.select(events)
        .where(status_is(events.c.status, Status.PROCESSING.value), events.c.lease_expires_at < now)
        .order_by(events.c.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    swept: list[Event] = []
    with store.transaction() as connection:
        for row in connection.execute(expired).mappings().all():
            event = event_from_row(row)
            decision = decide(event)
            connection.execute(
                events.update()
                .where(_held(event.row_id, row["lease_token"]))
                .values(
                    status=decision.status.value,
                    next_attempt_at=decision.next_attempt_at,
                    last_error=decision.last_error,
                    outcome=decision.outcome,
                    lease_token=None,
                    lease_expires_at=None,
                )
            )
            swept.append(event)
    return swept


def mark_inline(
    connection: Connection, row_id: int, status: Status, outcome: str, now: datetime
) -> None:
    """Inline mode: the event inserted in this transaction is done in this transaction."""
    result = connection.execute(
        events.update()
        .where(events.c.id == row_id)
        .values(status=status.value, outcome=outcome, attempts=1, processed_at=now)
    )
    if result.rowcount != 1:
        raise RuntimeError(f"event row {row_id} vanished inside its inline transaction")
