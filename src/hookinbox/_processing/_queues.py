"""The queues the worker's loops run: events, and (in `outbox/_relay.py`) outbox messages.

Both lease through the processing service (`Processing`: a storage queue each, one class
underneath) and share one
rhythm, written once here: write down the attempts kept while the database was away, check
cheaply whether anything is due before taking SQLite's write lock to lease (skipped while the
last lease came back full: the queue is busy and the check would only cost a read), give back
what a lease found held by a dead process (its lease expired: the owner decides how), and when
idle sleep no longer than until the soonest retry (PostgreSQL, and SQLite under `hookinbox
serve`, whose worker polls every second; a 50 ms SQLite poll is already a cheap read).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from hookinbox._logging import logger
from hookinbox._processing._loop import SHORT_POLL
from hookinbox._processing._processor import Processor
from hookinbox._processing._service import Processing
from hookinbox._processing._unrecorded import Unrecorded
from hookinbox._records import Lease, Leased

log = logger("hookinbox.worker")

T = TypeVar("T")


class StoreQueue(ABC, Generic[T]):
    """A `WorkQueue` over a leased table; subclasses say which table and how to process."""

    name: str

    def __init__(
        self, processing: Processing, unrecorded: Unrecorded, lease_seconds: float
    ) -> None:
        self.processing = processing
        self.unrecorded = unrecorded
        self.lease_seconds = lease_seconds
        self._sqlite = processing.dialect.single_writer
        self._busy = False

    @abstractmethod
    def now(self) -> datetime: ...

    @abstractmethod
    def _has_due(self, now: datetime) -> bool: ...

    @abstractmethod
    def _next_due_at(self) -> datetime | None: ...

    @abstractmethod
    def _lease(self, limit: int, now: datetime, until: datetime) -> Lease[T]: ...

    @abstractmethod
    def _give_back(self, item: T) -> None:
        """An item whose previous lease expired (its process died): give it back."""

    def lease(self, limit: int) -> list[T]:
        now = self.now()
        self.unrecorded.retry(now)
        if self._sqlite and not self._busy and not self._has_due(now):
            return []  # a read: polling SQLite must not take the write lock every 50 ms
        lease = self._lease(limit, now, now + timedelta(seconds=self.lease_seconds))
        for item in lease.expired:
            self._give_back(item)
        self._busy = len(lease.fresh) + len(lease.expired) == limit
        return lease.fresh

    def idle_wait(self, poll: float) -> float:
        if self._sqlite and poll <= SHORT_POLL:
            return poll  # the poll is a cheap read already; no need to look further ahead
        due = self._next_due_at()
        if due is None:
            return poll
        return max(0.0, min(poll, (due - self.now()).total_seconds()))


class EventQueue(StoreQueue[Leased]):
    name = "events"

    def __init__(self, processor: Processor, lease_seconds: float) -> None:
        super().__init__(processor.processing, processor.unrecorded, lease_seconds)
        self.processor = processor

    def now(self) -> datetime:
        return self.processor.now()

    def _has_due(self, now: datetime) -> bool:
        return self.processing.events_due(now)

    def _next_due_at(self) -> datetime | None:
        return self.processing.next_event_due_at()

    def _lease(self, limit: int, now: datetime, until: datetime) -> Lease[Leased]:
        return self.processing.lease_events(limit=limit, now=now, until=until)

    def _give_back(self, item: Leased) -> None:
        event = item.event
        if self.processing.release(item, self.processor.expired(event)):
            log.warning("%s %s: lease expired (worker lost); given back", event.source, event.id)

    def process(self, item: Leased) -> str:
        return self.processor.process(item)
