"""`Processing`: what the worker and the relay ask of an inbox's data, asked in one place.

The processor (one attempt: the claim, the mark, the release), the queues' rhythm (the due
check, the lease, the look-ahead, what a dead process held given back), the relay's
settlements, the heartbeat, a handler's `ctx.ordering` and `ctx.outbox`, and the async
worker's paths to each ask here, never a store's gateways. So this is the one module on the
processing side that knows an inbox keeps its work in exactly one store. Were it several (a
queue database of its own, shards), a lease would be taken from the store that holds the
queue, a claim and a handler's writes sent to the store its event lives in, the heartbeat
written where operators read it; the processor, the loops and the relay would not change.

Each method means what the gateway it forwards to means (its docstring there says what); a
method is one call, so the hot path (a lease per batch, a claim per event) pays one attribute
hop and no allocation more than it did. Nothing here decides: retries, schedules and
settlements are the processor's and the relay's.

Built once per store, where the store is built: `Runtime.processing` for an inbox's own store
(its thread worker, relay and heartbeats, and the async worker's threads), and one over each
async worker's store (`Runtime.async_worker`, `Runtime.async_relay_only`), whose calls run
through that store's greenlet bridge.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hookinbox._model import Status
from hookinbox._records import Beat, Lease, Leased, LeasedMessage, Release, Settlement
from hookinbox._storage import Listener

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from hookinbox._storage import Dialect, Store


class Processing:
    """What the worker and the relay ask of one inbox's data (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # The gateways, looked up once: each call below is then one hop, as before.
        self._events = store.events
        self._messages = store.messages
        self._ordering = store.ordering
        self._outbox = store.outbox
        self._liveness = store.liveness
        self.dialect: Dialect = store.dialect
        """What the database can do (one writer at a time; wake-ups by NOTIFY), and its name."""

    # -- the store's plumbing -----------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Migrate (or check) the schema, once, before the first lease."""
        self._store.ensure_schema()

    def transaction(self) -> AbstractContextManager[Connection]:
        """The processing transaction: the claim, the handlers' writes and the mark commit in
        it together, or none of them."""
        return self._store.transaction()

    def refuse_aborted(self, connection: Connection) -> None:
        """Raise if a handler left `connection`'s transaction unable to commit (an error it
        swallowed), so the attempt fails instead of committing half."""
        self._store.refuse_aborted(connection)

    def listener(self, channels: Mapping[str, threading.Event], stop: threading.Event) -> Listener:
        """A thread setting each channel's wake-up when the database announces it (where it
        announces: `dialect.listens`), until `stop` is set; not started."""
        return Listener(self._store, channels, stop)

    # -- the events' queue --------------------------------------------------------------------

    def events_due(self, now: datetime) -> bool:
        """A cheap read: is any event due? (Polling SQLite must not take its write lock.)"""
        return self._events.has_due(now)

    def next_event_due_at(self) -> datetime | None:
        """When the soonest waiting event no worker holds becomes due."""
        return self._events.next_due_at()

    def lease_events(self, *, limit: int, now: datetime, until: datetime) -> Lease[Leased]:
        """Up to `limit` due events, oldest due first, held until `until`; with those whose
        previous lease had expired (their process died), for the caller to give back."""
        return self._events.lease(limit=limit, now=now, until=until)

    def claim(
        self, connection: Connection, leased: Leased, status: Status, now: datetime, outcome: str
    ) -> bool:
        """The processing transaction's first statement: the event ends with `status` and
        `outcome`; True when the lease was still ours."""
        return self._events.claim(connection, leased, status, now, outcome)

    def set_outcome(self, connection: Connection, row_id: int, outcome: str) -> None:
        """In the processing transaction: the handlers' outcome, when not the claim's."""
        self._events.set_outcome(connection, row_id, outcome)

    def release(self, leased: Leased, decision: Release) -> bool:
        """End an unsuccessful attempt as `decision` says, if the lease is still ours."""
        return self._events.release(leased, decision)

    def give_back_event(self, row_id: int, token: str, now: datetime) -> bool:
        """A leased event its worker stopped before it ended: due again at once, its attempt
        not counted; True if the lease was still `token`'s."""
        return self._events.give_back(row_id, token, now)

    def mark_inline(
        self, connection: Connection, row_id: int, status: Status, outcome: str, now: datetime
    ) -> None:
        """Inline mode: the event inserted in this transaction is done in it."""
        self._events.mark_inline(connection, row_id, status, outcome, now)

    # -- a handler's context ------------------------------------------------------------------

    def advance(
        self,
        connection: Connection,
        *,
        object_key: str,
        position: int,
        source: str,
        event_id: str,
        now: datetime,
    ) -> bool:
        """The ordering guard, in the handler's transaction: record `position` for
        `object_key` unless a greater one is recorded; True if recorded."""
        return self._ordering.advance(connection, object_key=object_key, position=position,
                                      source=source, event_id=event_id, now=now)  # fmt: skip

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
        """An outbox message, in the handler's transaction; False if (destination, key)
        exists."""
        return self._outbox.enqueue(connection, destination=destination, key=key,
                                    payload=payload, ordering_key=ordering_key, source=source,
                                    event_id=event_id, now=now,
                                    trace_context=trace_context)  # fmt: skip

    # -- the outbox's queue -------------------------------------------------------------------

    def messages_due(self, now: datetime) -> bool:
        """A cheap read: is any outbox message due?"""
        return self._messages.has_due(now)

    def next_message_due_at(self) -> datetime | None:
        """When the soonest waiting message no relay holds becomes due."""
        return self._messages.next_due_at()

    def lease_messages(self, *, limit: int, now: datetime, until: datetime) -> Lease[LeasedMessage]:
        """Up to `limit` due messages (an ordering key's one at a time), as `lease_events`."""
        return self._messages.lease(limit=limit, now=now, until=until)

    def record(self, leased: LeasedMessage, settlement: Settlement, now: datetime) -> bool:
        """How a delivery attempt ended, if the lease is still ours; True when it was."""
        return self._messages.record(leased, settlement, now)

    def give_back_message(self, row_id: int, token: str, now: datetime) -> bool:
        """`give_back_event` for a message its relay stopped before it was settled."""
        return self._messages.give_back(row_id, token, now)

    # -- liveness -----------------------------------------------------------------------------

    def beat(self, me: Beat, *, alive_for: timedelta) -> None:
        """Record that process `me` is alive now (the database's time), for `alive_for` more."""
        self._liveness.beat(me, alive_for=alive_for)

    def forget(self, worker_id: str) -> None:
        """A clean stop: the process's heartbeat row goes."""
        self._liveness.forget(worker_id)
