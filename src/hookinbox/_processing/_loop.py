"""One lease-process loop: lease due items, run them on a thread pool, sweep, sleep, repeat.

The worker runs one loop per queue (events; outbox messages), each with its own threads and
its own wake-up signal. A queue says how to lease, process and sweep its items; the loop owns
the rhythm: it leases only as many items as it has free threads (so a lease is never held by
an item waiting in a local queue), sleeps until woken, a poll interval passes, or the soonest
scheduled retry comes, and on stop lets the items in flight finish within the grace period.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger

log = logger("hookinbox.worker")

T = TypeVar("T")

SHORT_POLL = 0.1
"""A poll at most this long (SQLite's 50 ms) finds a retry coming due soon enough by itself:
no need to look for the soonest one. A longer poll (1 s) is shortened to reach it."""


class WorkQueue(Protocol[T]):
    name: str

    def lease(self, limit: int) -> list[T]:
        """Lease up to `limit` due items (an empty list when none is due)."""

    def process(self, item: T) -> object:
        """Run one leased item to its end; exceptions are bugs (logged, the lease expires)."""

    def sweep(self) -> None:
        """Give back items whose lease expired (their process died)."""

    def idle_wait(self, poll: float) -> float:
        """How long to sleep when nothing is due: at most `poll`, less if a retry is sooner."""


class LeaseLoop(Generic[T]):
    def __init__(
        self,
        queue: WorkQueue[T],
        *,
        concurrency: int,
        poll: float,
        sweep_interval: float,
        wake: threading.Event,
        stopping: threading.Event,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.concurrency = concurrency
        self.poll = poll
        self.sweep_interval = sweep_interval
        self.wake = wake
        self.stopping = stopping
        self._in_flight = 0
        self._lock = threading.Lock()

    def run(self) -> None:
        """Lease and process until `stopping` is set; does not wait for items in flight."""
        executor = ThreadPoolExecutor(
            self.concurrency, thread_name_prefix=f"hookinbox-{self.queue.name}"
        )
        next_sweep = 0.0
        try:
            while not self.stopping.is_set():
                self.wake.clear()
                if time.monotonic() >= next_sweep:
                    self._sweep()
                    next_sweep = time.monotonic() + self.sweep_interval
                free = self.concurrency - self._in_flight
                leased: list[T] = []
                if free > 0:
                    try:
                        leased = self.queue.lease(free)
                    except StoreUnavailable as error:
                        log.warning("cannot lease %s: %s", self.queue.name, error)
                        self.stopping.wait(min(5.0, self.poll * 20))
                        continue
                for item in leased:
                    with self._lock:
                        self._in_flight += 1
                    executor.submit(self._process, item)
                if leased and len(leased) == free:
                    self.wake.wait(self.poll)  # every thread busy: a finishing item wakes us
                elif not leased:
                    self.wake.wait(self._idle_wait())
        finally:
            executor.shutdown(wait=False)

    def drain(self, deadline: float) -> bool:
        """Wait (until the monotonic `deadline`) for items in flight; True if none is left."""
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            self.wake.wait(0.05)
            self.wake.clear()
        with self._lock:
            return self._in_flight == 0

    def run_until_idle(self, deadline: float) -> int:
        """In the calling thread, one item at a time, until none is due; returns the count."""
        self._sweep()
        done = 0
        while time.monotonic() < deadline:
            leased = self.queue.lease(1)
            if not leased:
                break
            for item in leased:
                self.queue.process(item)
                done += 1
        return done

    def _process(self, item: T) -> None:
        try:
            self.queue.process(item)
        except Exception:  # a bug in hookinbox itself; the lease will expire and be swept
            log.exception("unexpected error processing a %s item", self.queue.name)
        finally:
            with self._lock:
                self._in_flight -= 1
            self.wake.set()

    def _sweep(self) -> None:
        try:
            self.queue.sweep()
        except StoreUnavailable as error:
            log.warning("cannot sweep expired %s leases: %s", self.queue.name, error)

    def _idle_wait(self) -> float:
        try:
            return self.queue.idle_wait(self.poll)
        except StoreUnavailable:
            return self.poll
