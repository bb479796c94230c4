"""A leased queue: the one class behind the worker's events (`Store.events`) and the relay's
outbox messages (`Store.messages`).

A queue keeps its unfinished work in rows with a state, the time the next attempt is due, an
attempt count and a lease (token and expiry). The events' work lives in a narrow table of its
own beside the big events table (schema 9, `Shape.separate`): a lease, a release and a claim
write that small table, and the event's row is written once when its work ends. Outbox messages
have theirs too, `hookinbox_outbox_queue` (schema 15), for the same reason.

- **lease**: up to N due rows get a token, an expiry and one more attempt, oldest due first, in
  one short transaction that is committed before any work starts (so a row that kills its
  worker every time still runs out of attempts). Concurrent workers on PostgreSQL take
  different rows (`FOR UPDATE SKIP LOCKED`); SQLite's write lock serialises them anyway. A
  leased row keeps its state (`pending`, `deferred`): the lease changes only columns no index
  covers, so PostgreSQL keeps the update on the row's page (heap-only). A row whose lease
  expired is due again; the lease that takes it hands it back as `expired` (its worker died),
  for the owner to give back as it decides, and counts no attempt for it. How a database
  leases (one statement, a read then a write, or three steps) is `_leases/`'s, one module per
  way, chosen once per queue.
- **finish / settle / update**: every later write to a leased row is conditional on (id, token),
  found by primary key: a worker whose lease was taken over matches nothing and changes
  nothing. `finish` ends the work inside the caller's transaction (the processing transaction:
  the queue row is deleted, which also holds it until the commit); `settle` puts it back or
  fails it, in a transaction of its own.

Statuses are written into the SQL as constants (`status_is`): SQLite uses a partial index only
when it can prove that the query implies the index's WHERE.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._logging import logger
from hookinbox._model import WAITING_STATUSES, MessageStatus, Status
from hookinbox._records import Lease, Leased, LeasedMessage, Release, Settlement
from hookinbox._storage._leases import LeaseParts, Leasing, leasing_for
from hookinbox._storage._pausing import ANY_PAUSED, Pausing
from hookinbox._storage._rows import leased_event, leased_message
from hookinbox._storage._schema import (
    event_queue,
    events,
    outbox,
    outbox_queue,
    payloads,
    status_is,
)

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

log = logger("hookinbox._storage")

T = TypeVar("T")
When = datetime | sa.BindParameter[Any]
"""A time, or the bound parameter a statement built once takes it as."""
DueAlso = Callable[[When], Sequence[sa.ColumnElement[bool]]]
ToItem = Callable[[Mapping[Any, Any], str, datetime], T]
"""A leased row (the item's columns; with a separate queue table, `queue_attempts` and
`queue_next_attempt_at` too), the lease token and its expiry -> what the worker gets."""


LEASES_PER_LEASE = 20
"""Leases run again in one lease's transaction while each took only rows it parked (a paused
source's backlog that its pause has not parked yet); past it the lease comes back empty."""


def _nothing_more(_now: When) -> Sequence[sa.ColumnElement[bool]]:
    return ()


@dataclass(frozen=True, slots=True)
class Shape:
    """Where one queue keeps its work and the items it hands out."""

    queue: sa.Table
    """The rows of unfinished work: `id`, the state column, `next_attempt_at`, `attempts`,
    `lease_token`, `lease_expires_at`."""
    state: str
    """The state column's name."""
    waiting: tuple[str, ...]
    """States that are due once `next_attempt_at` has come."""
    items: sa.Table
    """The rows handed out; the queue table itself when they are one."""
    status: str = "status"
    """The items' status column, written with the queue's state."""
    due_also: DueAlso = field(default=_nothing_more)
    """Any further rule that makes a waiting row due (the outbox's ordering keys)."""
    attached: sa.Table | None = None
    """The items' write-once columns in a table of their own, handed out with each item (the
    events' payloads, schema 14)."""
    lease_also: tuple[sa.Label[Any], ...] = ()
    """Columns a lease reads beside each item (`LeaseParts.also`)."""
    due_index: str = ""
    """The index of waiting rows in the lease's order, `(next_attempt_at, id)`: the due reads
    name it to the dialect (SQLite, without statistics, would rather read the open rows by
    state and sort the whole backlog for each lease)."""

    @property
    def separate(self) -> bool:
        return self.queue is not self.items


class Queue(Generic[T]):
    """One queue's statements, on one store."""

    def __init__(self, store: StoreSeam, shape: Shape, to_item: ToItem[T]) -> None:
        self.store = store
        self.shape = shape
        self.to_item = to_item
        self._q = shape.queue.c
        self._finishes: dict[tuple[str, ...], tuple[sa.Executable, sa.Executable | None]] = {}
        # How this database leases (`_leases/`), chosen once; its statements are built on the
        # first lease.
        self._leasing_way: type[Leasing] = leasing_for(store.dialect)

    # -- reads (no write lock on SQLite) ------------------------------------------------------

    def _waiting(self) -> sa.ColumnElement[bool]:
        return status_is(self._q[self.shape.state], *self.shape.waiting)

    def due(self, now: When) -> list[sa.ColumnElement[bool]]:
        q = self._q
        return [
            self._waiting(),
            q.next_attempt_at <= now,
            sa.or_(q.lease_token.is_(None), q.lease_expires_at < now),
            *self.shape.due_also(now),
        ]

    def has_due(self, now: datetime) -> bool:
        """A cheap read: is any row due? (Polling SQLite must not take its write lock.)"""
        with self.store.reading() as connection:
            return connection.execute(self._any_due, {"now": now}).first() is not None

    def next_due_at(self) -> datetime | None:
        """When the soonest waiting row that no worker holds becomes due (to sleep that long);
        read in the due index's order, stepping over the held rows at its head."""
        q = self._q
        query = self._in_due_order(
            sa.select(q.next_attempt_at)
            .where(self._waiting(), q.lease_token.is_(None))
            .order_by(q.next_attempt_at, q.id)
            .limit(1)
        )
        with self.store.reading() as connection:
            value = connection.execute(query).scalar()
        return value if isinstance(value, datetime) else None

    def _in_due_order(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """`query`, read through the due index (where the dialect needs telling)."""
        if not self.shape.due_index:
            return query
        return self.store.dialect.read_through(query, self.shape.queue, self.shape.due_index)

    # -- the lease ----------------------------------------------------------------------------

    def lease(self, *, limit: int, now: datetime, until: datetime) -> Lease[T]:
        """Lease up to `limit` due rows, oldest due first, counting one attempt each (none for
        a row whose previous lease expired: its attempt was counted then)."""
        token = uuid.uuid4().hex
        parameters = {"now": now, "limit": limit, "token": token, "until": until}
        with self.store.transaction() as connection:
            for _ in range(LEASES_PER_LEASE):
                taken = self._leasing.lease(connection, parameters)
                rows = self._kept(connection, taken, now)
                # A lease that took only rows it may not hand out (a paused source's, parked)
                # leases again: an empty lease means "nothing is due" to its callers.
                if rows or not taken:
                    break
        # RETURNING keeps no order: back to the order they were picked in.
        rows.sort(key=lambda row: (row["queue_next_attempt_at"], row["id"]))
        items = [(row["previous"] is None, self._readable(row, token, until)) for row in rows]
        fresh = [item for new, item in items if new and item is not None]
        expired = [item for new, item in items if not new and item is not None]
        return Lease(token, fresh, expired)

    def _kept(
        self, _connection: Connection, rows: list[Mapping[Any, Any]], _now: datetime
    ) -> list[Mapping[Any, Any]]:
        """Inside the lease's transaction: the rows it took that go to the worker."""
        return rows

    def _readable(self, row: Mapping[Any, Any], token: str, until: datetime) -> T | None:
        """The row as an item; None (logged) for an event whose stored body no key given
        decrypts (`_payload_codec`): its lease expires and it is tried again, as a crashed
        attempt's is, while the rest of the batch is processed."""
        try:
            return self.to_item(row, token, until)
        except ConfigurationError as error:
            log.error("cannot read a leased item, left to its lease's expiry: %s", error)
            return None

    @cached_property
    def _leasing(self) -> Leasing:
        shape = self.shape
        parts = LeaseParts(
            shape.queue, shape.items, self._candidates(), shape.attached, also=shape.lease_also
        )
        return self._leasing_way(parts)

    def _candidates(self) -> sa.Select[Any]:
        """The due rows' ids and previous tokens, in the lease's order (through the due
        index), at most `limit`; `SKIP LOCKED` where rows lock (SQLite has one writer anyway)."""
        q = self._q
        now = sa.bindparam("now", type_=q.next_attempt_at.type)
        return self._in_due_order(
            sa.select(q.id, q.lease_token.label("previous"))
            .where(*self.due(now))
            .order_by(q.next_attempt_at, q.id)
            .limit(sa.bindparam("limit", type_=sa.Integer))
            .with_for_update(skip_locked=True)
        )

    @cached_property
    def _any_due(self) -> sa.Select[Any]:
        """One due row's id, if any (the pollers' cheap read), built once (parameter `now`)."""
        q = self._q
        now = sa.bindparam("now", type_=q.next_attempt_at.type)
        return self._in_due_order(sa.select(q.id).where(*self.due(now)).limit(1))

    # -- writes to a leased row ---------------------------------------------------------------

    def held(
        self, row_id: int | sa.BindParameter[int], token: str | sa.BindParameter[str]
    ) -> sa.ColumnElement[bool]:
        """The row, only while this lease holds it: found by its primary key, the token
        compared by the database."""
        queue = self.shape.queue
        return sa.and_(queue.c.id == row_id, queue.c.lease_token == token)

    def finish(
        self, connection: Connection, row_id: int, token: str, values: Mapping[Any, Any]
    ) -> bool:
        """The work ended, in the caller's transaction: the queue forgets the row (deleted, or
        its lease cleared when the queue is the items' table) and the item takes `values`
        (and, from a separate queue, its attempt count). True when the lease was still
        `token`'s; on PostgreSQL the row stays locked until the transaction ends."""
        names = tuple(sorted(values))
        built = self._finishes.get(names)
        if built is None:
            built = self._finishes[names] = _finish_statement(self, names)
        statement, result_rows = built
        parameters = {"row_id": row_id, "token": token, **values}
        if result_rows is None:  # one statement
            return connection.execute(statement, parameters).rowcount == 1
        gone = connection.execute(result_rows, parameters).first()
        if gone is None:
            return False
        connection.execute(statement, {**parameters, "queue_attempts": gone.attempts})
        return True

    def settle(
        self,
        row_id: int,
        token: str,
        *,
        state: str,
        next_attempt_at: datetime,
        values: Mapping[Any, Any],
        attempts: int = 0,
    ) -> bool:
        """Give the row back (a waiting state) or fail it, in a transaction of its own, if the
        lease is still `token`'s: its lease cleared, `attempts` added to its count, and the
        item's status and `values` written. True when it was."""
        q, shape = self._q, self.shape
        with self.store.transaction() as connection:
            moved = {
                shape.state: state,
                "next_attempt_at": next_attempt_at,
                "lease_token": None,
                "lease_expires_at": None,
                "attempts": q.attempts + attempts,
            }
            update = shape.queue.update().where(self.held(row_id, token))
            if not shape.separate:
                return connection.execute(update.values(**moved, **values)).rowcount == 1
            if connection.dialect.update_returning:
                row = connection.execute(update.values(**moved).returning(q.attempts)).first()
            elif connection.execute(update.values(**moved)).rowcount == 1:  # MariaDB
                # The row is ours (locked by the update) until the transaction ends.
                row = connection.execute(sa.select(q.attempts).where(q.id == row_id)).first()
            else:
                row = None
            if row is None:
                return False
            item = {shape.status: state, "attempts": row.attempts, **values}
            connection.execute(shape.items.update().where(shape.items.c.id == row_id).values(item))
            return True

    def give_back(self, row_id: int, token: str, now: datetime) -> bool:
        """A leased row its worker stopped before it ended (a shutdown past its grace period,
        an event loop blocked by a handler): its lease cleared, due again at once in the
        state it was leased in, its attempt not counted (nothing of it ran to a commit); the
        item itself is not written. True if the lease was still `token`'s."""
        q = self._q
        update = (
            self.shape.queue.update()
            .where(self.held(row_id, token))
            .values(
                next_attempt_at=now,
                lease_token=None,
                lease_expires_at=None,
                attempts=q.attempts - 1,
            )
        )
        with self.store.transaction() as connection:
            return connection.execute(update).rowcount == 1

    def update(self, connection: Connection, row_id: int, values: Mapping[Any, Any]) -> None:
        """Write `values` to an item inside the caller's transaction (its work's)."""
        items = self.shape.items
        result = connection.execute(items.update().where(items.c.id == row_id).values(**values))
        if result.rowcount != 1:
            raise RuntimeError(f"row {row_id} vanished inside its transaction")

    def finish_unleased(
        self, connection: Connection, row_id: int, values: Mapping[Any, Any]
    ) -> None:
        """Inline mode: the item inserted in this transaction is done in this transaction."""
        shape = self.shape
        if shape.separate:
            connection.execute(shape.queue.delete().where(self._q.id == row_id))
        self.update(connection, row_id, values)


def _finish_statement(
    queue: Queue[Any], names: tuple[str, ...]
) -> tuple[sa.Executable, sa.Executable | None]:
    """`finish`'s statement(s) for a set of value names, built once: the hot path's one
    statement per event (SQLAlchemy compiles it once, and it need not be built, coerced and
    hashed again for every event). With a separate queue table: one statement where the
    database returns joined rows (PostgreSQL: a DELETE ... RETURNING feeding the UPDATE),
    else the DELETE ... RETURNING and then the UPDATE."""
    shape = queue.shape
    held = queue.held(sa.bindparam("row_id"), sa.bindparam("token"))
    values = {name: sa.bindparam(name, type_=shape.items.c[name].type) for name in names}
    if not shape.separate:
        clear = {"lease_token": None, "lease_expires_at": None}
        return shape.items.update().where(held).values(**values, **clear), None
    gone = shape.queue.delete().where(held).returning(shape.queue.c.id, shape.queue.c.attempts)
    items = shape.items
    if queue.store.dialect.returns_joined_rows:
        deleted = gone.cte("gone")
        statement = (
            items.update()
            .where(items.c.id == deleted.c.id)
            .values(**values, attempts=deleted.c.attempts)
        )
        return statement, None
    statement = (
        items.update()
        .where(items.c.id == sa.bindparam("row_id"))
        .values(**values, attempts=sa.bindparam("queue_attempts"))
    )
    return statement, gone


# -- the two queues ---------------------------------------------------------------------------


class EventQueue(Queue[Leased]):
    """The worker's queue: events, their work in `hookinbox_event_queue`."""

    def __init__(self, store: StoreSeam) -> None:
        shape = Shape(
            queue=event_queue,
            state="state",
            waiting=tuple(s.value for s in WAITING_STATUSES),
            items=events,
            attached=payloads,
            lease_also=(ANY_PAUSED,),
            due_index="ix_hookinbox_event_queue_due",
        )
        super().__init__(store, shape, leased_event)
        self._pausing = Pausing(store)

    def _kept(
        self, connection: Connection, rows: list[Mapping[Any, Any]], now: datetime
    ) -> list[Mapping[Any, Any]]:
        """The rows of a paused source are parked, in the lease's transaction (`_pausing.py`)."""
        return self._pausing.park_leased(connection, rows, now)

    def claim(
        self, connection: Connection, leased: Leased, status: Status, now: datetime, outcome: str
    ) -> bool:
        """First statement of the processing transaction: the event's work ends with
        `status` and the outcome it will have unless the handlers say otherwise
        (`set_outcome`). True when the lease was still ours; the queue row stays locked
        (deleted, uncommitted) until the transaction ends, so no lease can take it."""
        values = {
            "status": status.value,
            "processed_at": now,
            "outcome": outcome,
            "last_error": None,
            "deferred_since": None,
        }
        return self.finish(connection, leased.event.row_id, leased.token, values)

    def set_outcome(self, connection: Connection, row_id: int, outcome: str) -> None:
        """A statement of the processing transaction, when the handlers' outcome is not the
        one the claim wrote (a business key already taken)."""
        self.update(connection, row_id, {"outcome": outcome})

    def release(self, leased: Leased, release: Release) -> bool:
        """End an unsuccessful attempt, if the lease is still ours; True when it was."""
        values: dict[str, Any] = {"last_error": release.last_error, "outcome": release.outcome}
        if release.deferred_since is not None:
            values["deferred_since"] = release.deferred_since
        if release.count_deferral:
            values["deferrals"] = events.c.deferrals + 1
        return self.settle(
            leased.event.row_id,
            leased.token,
            state=release.status.value,
            next_attempt_at=release.next_attempt_at,
            values=values,
            attempts=-1 if release.refund_attempt else 0,
        )

    def mark_inline(
        self, connection: Connection, row_id: int, status: Status, outcome: str, now: datetime
    ) -> None:
        """Inline mode: the event inserted in this transaction is done in this transaction."""
        values = {"status": status.value, "outcome": outcome, "attempts": 1, "processed_at": now}
        self.finish_unleased(connection, row_id, values)


class MessageQueue(Queue[LeasedMessage]):
    """The relay's queue: outbox messages, their work in `hookinbox_outbox_queue`."""

    def __init__(self, store: StoreSeam) -> None:
        shape = Shape(
            queue=outbox_queue,
            state="state",
            waiting=(MessageStatus.PENDING.value,),
            items=outbox,
            due_also=_ordered,
            due_index="ix_hookinbox_outbox_queue_due",
        )
        super().__init__(store, shape, leased_message)

    def record(self, leased: LeasedMessage, settlement: Settlement, now: datetime) -> bool:
        """How the delivery attempt ended, if the lease is still ours; True when it was."""
        message = leased.message
        if settlement.status is MessageStatus.DELIVERED:
            with self.store.transaction() as connection:
                values = {"status": settlement.status.value, "delivered_at": now,
                          "last_error": settlement.last_error}  # fmt: skip
                return self.finish(connection, message.row_id, leased.token, values)
        return self.settle(
            message.row_id,
            leased.token,
            state=settlement.status.value,
            next_attempt_at=settlement.next_attempt_at,
            # Written to the message too (no index covers it): the table says when it is due.
            values={
                "last_error": settlement.last_error,
                "next_attempt_at": settlement.next_attempt_at,
            },
        )


def _ordered(_now: When) -> list[sa.ColumnElement[bool]]:
    """A message with an ordering key is due only when no older one with its key is unsent
    (waiting, or held by a relay: a failed one no longer holds the others back)."""
    earlier = outbox_queue.alias("earlier")
    predecessor_unsent = (
        sa.select(earlier.c.id)
        .where(
            earlier.c.ordering_key == outbox_queue.c.ordering_key,
            earlier.c.id < outbox_queue.c.id,
            status_is(earlier.c.state, MessageStatus.PENDING.value),
        )
        .exists()
    )
    return [sa.or_(outbox_queue.c.ordering_key.is_(None), ~predecessor_unsent)]
