"""The worker's queries: lease due events, claim one, and record how its attempt ended.

The life of one attempt takes two transactions:

1. `lease_due` (one statement, committed at once, for a batch of events): due events become
   `processing` with a lease token, an expiry and `attempts + 1`. The attempt is durable
   before any handler runs, so an event that kills its worker every time still runs out of
   attempts. On PostgreSQL the candidates are picked `FOR UPDATE SKIP LOCKED`, so concurrent
   workers take different events without waiting (`_leases.py`, shared with the outbox).
2. `claim` opens the processing transaction with a conditional update on (id, lease token,
   status): the first statement moves the event to its final status, with the outcome it
   will have unless a handler's business key says otherwise, and locks the row; the
   handlers' writes follow on the same connection and everything commits together. A worker
   whose lease was swept and re-leased matches no row and runs nothing.

When an attempt fails, `release` puts the event back (pending, deferred) or ends it (failed),
again only if the lease is still the caller's. `sweep_expired` returns events whose worker
vanished: their lease expired while they were still `processing`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import WAITING_STATUSES, Event, Status
from hookinbox._storage._leases import LeasedQueue
from hookinbox._storage._schema import events
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


EVENTS = LeasedQueue(events, tuple(_WAITING), Status.PROCESSING.value)
"""The event queue (`_leases.py` holds the SQL it shares with the outbox's)."""


def has_due(store: Store, now: datetime) -> bool:
    """A cheap read (no write lock on SQLite): is any event due?"""
    return EVENTS.has_due(store, now)


def next_due_at(store: Store) -> datetime | None:
    """When the soonest waiting event becomes due (to sleep exactly that long)."""
    return EVENTS.next_due_at(store)


def lease_due(store: Store, *, limit: int, now: datetime, lease_until: datetime) -> list[Leased]:
    """Lease up to `limit` due events, oldest due first, counting one attempt each."""
    token, rows = EVENTS.lease(store, limit=limit, now=now, until=lease_until)
    return [Leased(event_from_row(row), token, lease_until) for row in rows]


_CLAIM = (
    events.update()
    .where(EVENTS.held(sa.bindparam("row_id"), sa.bindparam("token")))
    .values(
        status=sa.bindparam("new_status"),
        processed_at=sa.bindparam("now", type_=events.c.processed_at.type),
        outcome=sa.bindparam("new_outcome"),
        last_error=None,
        deferred_since=None,
        lease_token=None,
        lease_expires_at=None,
    )
)
"""Built once: the hot path's one statement per event (SQLAlchemy compiles it once, and it
need not be built, coerced and hashed again for every event)."""


def claim(
    connection: Connection, leased: Leased, status: Status, now: datetime, outcome: str
) -> bool:
    """First statement of the processing transaction: move the event to its final status,
    with the outcome it will have unless the handlers say otherwise (`set_outcome`).

    True when the lease was still ours; the row stays locked until the transaction ends.
    """
    result = connection.execute(
        _CLAIM,
        {
            "row_id": leased.event.row_id,
            "token": leased.token,
            "new_status": status.value,
            "now": now,
            "new_outcome": outcome,
        },
    )
    return result.rowcount == 1


def set_outcome(connection: Connection, row_id: int, outcome: str) -> None:
    """A statement of the processing transaction, when the handlers' outcome is not the one
    the claim wrote (a business key already taken)."""
    result = connection.execute(
        events.update().where(events.c.id == row_id).values(outcome=outcome)
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
    }
    if release.refund_attempt:
        values["attempts"] = events.c.attempts - 1
    if release.deferred_since is not None:
        values["deferred_since"] = release.deferred_since
    if release.count_deferral:
        values["deferrals"] = events.c.deferrals + 1
    with store.transaction() as connection:
        return EVENTS.settle(connection, leased.event.row_id, leased.token, values)


def sweep_expired(
    store: Store, *, now: datetime, decide: Callable[[Event], Release], limit: int = 100
) -> Sequence[Event]:
    """Give back events whose lease expired while `processing` (their worker died).

    On PostgreSQL an event whose processing transaction is still open is row-locked and
    skipped, so a slow handler is never swept from under its worker.
    """

    def values(row: sa.RowMapping) -> dict[str, object]:
        decision = decide(event_from_row(row))
        return {
            "status": decision.status.value,
            "next_attempt_at": decision.next_attempt_at,
            "last_error": decision.last_error,
            "outcome": decision.outcome,
        }

    return [event_from_row(row) for row in EVENTS.sweep(store, now=now, decide=values, limit=limit)]


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
