"""The event queue: what the worker's event loop leases, processes and sweeps."""

from __future__ import annotations

from datetime import timedelta

from hookinbox._logging import logger
from hookinbox._processing._loop import SHORT_POLL
from hookinbox._processing._processor import Processor
from hookinbox._storage import Leased, has_due, lease_due, next_due_at, sweep_expired

log = logger("hookinbox.worker")


class EventQueue:
    name = "events"

    def __init__(self, processor: Processor, lease_seconds: float) -> None:
        self.processor = processor
        self.store = processor.store
        self.lease_seconds = lease_seconds
        self._sqlite = self.store.dialect == "sqlite"

    def lease(self, limit: int) -> list[Leased]:
        now = self.processor.now()
        self.processor.unrecorded.retry(now)
        if self._sqlite and not has_due(self.store, now):
            return []  # a read: polling SQLite must not take the write lock every 50 ms
        lease_until = now + timedelta(seconds=self.lease_seconds)
        return lease_due(self.store, limit=limit, now=now, lease_until=lease_until)

    def process(self, item: Leased) -> str:
        return self.processor.process(item)

    def sweep(self) -> None:
        swept = sweep_expired(self.store, now=self.processor.now(), decide=self.processor.expired)
        for event in swept:
            log.warning("%s %s: lease expired (worker lost); given back", event.source, event.id)

    def idle_wait(self, poll: float) -> float:
        if self._sqlite and poll <= SHORT_POLL:
            return poll  # the poll is a cheap read already; no need to look further ahead
        due = next_due_at(self.store)
        if due is None:
            return poll
        return max(0.0, min(poll, (due - self.processor.now()).total_seconds()))
