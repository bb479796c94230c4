"""One lease-process loop: `concurrency` threads lease due items, process them, sleep.

The worker runs one loop per queue (events; outbox messages), each with its own threads and
its own wake-up signal. A queue says how to lease and process its items (a lease also gives
back the items of a dead process, whose leases expired); the loop owns the rhythm.

Each thread takes its next item from the items the loop holds; when there is none, one thread
at a time (the leaser) leases a batch for everyone, up to `2 x concurrency` minus the items
being processed, keeps one and hands out the rest, so one lease (one commit) serves several
items and a thread that finishes finds its next item waiting. The leaser is also the one that
sleeps when nothing is due (until woken, a poll interval
passes, or the soonest scheduled retry comes) while the other threads wait for it. No thread
hands items to another through a queue and a wake-up: the thread that leased runs the first
item at once (a hand-off per item cost a worker on SQLite a third of its throughput).

An item waits at most one item's processing time with its lease held, and a worker killed
meanwhile leaves at most `2 x concurrency` items for the next lease to take back. On stop, no
thread leases again; the items held are finished within the grace period.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Generic, Protocol, TypeVar

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger

log = logger("hookinbox.worker")

T = TypeVar("T")

SHORT_POLL = 0.1
"""A poll at most this long (SQLite's 50 ms) finds a retry coming due soon enough by itself:
no need to look for the soonest one. A longer poll (1 s) is shortened to reach it."""

PREFETCH = 2
"""Items leased per thread at most: the one running and the one waiting for it."""


class WorkQueue(Protocol[T]):
    name: str

    def lease(self, limit: int) -> list[T]:
        """Lease up to `limit` due items (an empty list when none is due)."""

    def process(self, item: T) -> object:
        """Run one leased item to its end; exceptions are bugs (logged, the lease expires)."""

    def idle_wait(self, poll: float) -> float:
        """How long to sleep when nothing is due: at most `poll`, less if a retry is sooner."""


class LeaseLoop(Generic[T]):
    def __init__(
        self,
        queue: WorkQueue[T],
        *,
        concurrency: int,
        poll: float,
        wake: threading.Event,
        stopping: threading.Event,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.concurrency = concurrency
        self.poll = poll
        self.wake = wake
        self.stopping = stopping
        self._held: deque[T] = deque()
        """Leased, not yet started."""
        self._running = 0
        self._leasing = False
        self._changed = threading.Condition()

    def run(self) -> None:
        """Lease and process until `stopping` is set and the items held are done."""
        threads = [
            # Daemons: a thread blocked on the database (SQLite's lock, held by a slow handler)
            # must not keep the process alive past the grace period.
            threading.Thread(
                target=self._work, name=f"hookinbox-{self.queue.name}-{number}", daemon=True
            )
            for number in range(self.concurrency)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def drain(self, deadline: float) -> bool:
        """Wait (until the monotonic `deadline`) for items held or running; True if none is
        left."""
        with self._changed:
            while self._held or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.05))
            return True

    def run_until_idle(self, deadline: float) -> int:
        """In the calling thread, one item at a time, until none is due; returns the count."""
        done = 0
        while time.monotonic() < deadline:
            leased = self.queue.lease(1)
            if not leased:
                break
            for item in leased:
                self.queue.process(item)
                done += 1
        return done

    def _work(self) -> None:
        while (item := self._take()) is not None:
            try:
                self.queue.process(item)
            except Exception:  # a bug in hookinbox itself; the lease will expire and be swept
                log.exception("unexpected error processing a %s item", self.queue.name)
            finally:
                with self._changed:
                    self._running -= 1
                    self._changed.notify_all()

    def _take(self) -> T | None:
        """The next item to process (counted as running), or None once stopping and nothing
        is held. Leases (or sleeps while nothing is due) when it is this thread's turn."""
        while True:
            with self._changed:
                while not self._held and (self._leasing and not self.stopping.is_set()):
                    self._changed.wait(1.0)  # the leaser hands out what it finds
                if self._held:
                    self._running += 1
                    return self._held.popleft()
                if self.stopping.is_set():
                    return None
                self._leasing = True
            leased: list[T] = []
            try:
                leased = self._lease_or_sleep()
            finally:
                with self._changed:
                    self._leasing = False
                    self._held.extend(leased)
                    self._changed.notify_all()

    def _lease_or_sleep(self) -> list[T]:
        self.wake.clear()
        if self.stopping.is_set():
            return []
        limit = max(1, PREFETCH * self.concurrency - self._running)
        try:
            leased = self.queue.lease(limit)
        except StoreUnavailable as error:
            log.warning("cannot lease %s: %s", self.queue.name, error)
            self.stopping.wait(min(5.0, self.poll * 20))
            return []
        if not leased:
            self.wake.wait(self._idle_wait())
        return leased

    def _idle_wait(self) -> float:
        try:
            return self.queue.idle_wait(self.poll)
        except StoreUnavailable:
            return self.poll
