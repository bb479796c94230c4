"""`Processing`: what the worker and the relay ask of an inbox's data, asked in one place.

The processor (one attempt: the claim, the mark, the release), the queues' rhythm (the due
check, the lease, the look-ahead, what a dead process held given back), the relay's
settlements, the heartbeat, a handler's `ctx.ordering` and `ctx.outbox`, and the async
worker's paths to each ask here, never a store's gateways. So this is the one module on the
processing side that knows an inbox keeps its work in exactly one store. Were it several (a
queue database of its own, shards), a lease would be taken from the store that holds the
queue, a claim and a handler's writes sent to the store its event lives in, the heartbeat
written where operators read it; the processor, the loops and the relay would not change.

Each of its calls is the gateway's method of the same meaning (documented there), bound once
when the service is built: the hot path (a lease per batch, a claim per event) pays no call,
no allocation and one attribute hop fewer than when it reached through the store. Nothing
here decides: retries, schedules and settlements are the processor's and the relay's.

Built once per store, where the store is built: `Runtime.processing` for an inbox's own store
(its thread worker, relay and heartbeats, and the async worker's threads), and one over each
async worker's store (`Runtime.async_worker`, `Runtime.async_relay_only`), whose calls run
through that store's greenlet bridge.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hookinbox._storage import Listener

if TYPE_CHECKING:
    from hookinbox._storage import Dialect, Store


class Processing:
    """What the worker and the relay ask of one inbox's data (see the module's docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.dialect: Dialect = store.dialect
        """What the database can do (one writer at a time; wake-ups by NOTIFY), and its name."""

        # -- the store's plumbing
        self.ensure_schema = store.ensure_schema
        """Migrate (or check) the schema, once, before the first lease."""
        self.transaction = store.transaction
        """The processing transaction: the claim, the handlers' writes and the mark commit in
        it together, or none of them."""
        self.refuse_aborted = store.refuse_aborted
        """Raise if a handler left the transaction unable to commit (an error it swallowed)."""

        # -- the events' queue
        events = store.events
        self.events_due = events.has_due
        """A cheap read: is any event due? (Polling SQLite must not take its write lock.)"""
        self.next_event_due_at = events.next_due_at
        self.lease_events = events.lease
        self.claim = events.claim
        """The processing transaction's first statement; True when the lease was still ours."""
        self.set_outcome = events.set_outcome
        self.release = events.release
        """End an unsuccessful attempt as its `Release` says, if the lease is still ours."""
        self.give_back_event = events.give_back
        """A leased event its worker stopped before it ended: due again, no attempt counted."""
        self.mark_inline = events.mark_inline

        # -- a handler's context: its ordering guard and its outbox, in its transaction
        self.advance = store.ordering.advance
        self.enqueue = store.outbox.enqueue

        # -- the outbox's queue
        messages = store.messages
        self.messages_due = messages.has_due
        self.next_message_due_at = messages.next_due_at
        self.lease_messages = messages.lease
        self.record = messages.record
        """How a delivery attempt ended (its `Settlement`), if the lease is still ours."""
        self.give_back_message = messages.give_back

        # -- liveness: the heartbeat's row
        self.beat = store.liveness.beat
        self.forget = store.liveness.forget

    def listener(self, channels: Mapping[str, threading.Event], stop: threading.Event) -> Listener:
        """A thread setting each channel's wake-up when the database announces it (where it
        announces: `dialect.listens`), until `stop` is set; not started."""
        return Listener(self._store, channels, stop)
