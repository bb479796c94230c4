"""The worker loop: lease due events, process them on a thread pool, sweep, sleep, repeat.

Wake-ups: an in-process signal when ingest runs in the same process, PostgreSQL
LISTEN/NOTIFY across processes, and polling as the fallback (50 ms on SQLite, where a due check
is a cheap read; 1 s on PostgreSQL, where NOTIFY does the real work). When idle, the worker
also sleeps no longer than until the soonest scheduled retry.

SIGTERM or SIGINT: stop leasing, let the attempts in flight finish within the grace period,
return. Attempts cut off by the grace period roll back with the process and are retried after
their lease expires.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from hookinbox._errors import StoreUnavailable
from hookinbox.processing._processor import Processor
from hookinbox.storage import (
    Leased,
    Listener,
    has_due,
    lease_due,
    next_due_at,
    supports_listen,
    sweep_expired,
)

log = logging.getLogger("hookinbox.worker")


class BackgroundJob(Protocol):
    """A thread the worker starts with itself and stops with itself (the daily pruner)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    concurrency: int = 4
    """Events processed at once (threads). On SQLite, handlers take turns on the write lock."""
    lease_seconds: float = 60.0
    """How long a worker may hold an event before the sweeper assumes it died. Correctness does
    not depend on it (the processing transaction holds the row lock); it only bounds how soon an
    event held by a killed worker is retried."""
    poll_interval: float | None = None
    """Seconds between checks when nothing wakes the worker; None: 0.05 SQLite, 1.0 PostgreSQL."""
    sweep_interval: float = 5.0
    grace_period: float = 30.0
    """On shutdown, seconds to let attempts in flight finish."""
    handle_signals: bool = True
    """Install SIGTERM/SIGINT handlers (only from the main thread); off when embedded."""
    parent_pid: int | None = None
    """Stop when this process is gone (a worker started by `hookinbox serve`)."""


class Worker:
    """Processes due events until `stop()` is called."""

    def __init__(
        self,
        processor: Processor,
        options: WorkerOptions | None = None,
        *,
        wake: threading.Event | None = None,
        jobs: Sequence[BackgroundJob] = (),
    ) -> None:
        self.processor = processor
        self.store = processor.store
        self.options = options or WorkerOptions()
        if self.options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._wake = wake or threading.Event()
        self._jobs = list(jobs)
        self._stopping = threading.Event()
        self._in_flight = 0
        self._lock = threading.Lock()
        self._sqlite = self.store.dialect == "sqlite"
        default_poll = 0.05 if self._sqlite else 1.0
        self._poll = self.options.poll_interval or default_poll

    # -- control ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing; `run()` returns once the attempts in flight are done."""
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self) -> bool:
        """Work until stopped. True if every attempt in flight finished within the grace period."""
        self.store.ensure_schema()
        restore = self._install_signal_handlers()
        listener = None
        if supports_listen(self.store):
            listener = Listener(self.store, self._wake, self._stopping)
            listener.start()
        for job in self._jobs:
            job.start()
        executor = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix="hookinbox")
        log.info("worker started (concurrency %d)", self.options.concurrency)
        try:
            self._loop(executor)
        finally:
            executor.shutdown(wait=False)
            drained = self._drain()
            if listener is not None:
                listener.join(timeout=2.0)  # it checks the stop flag every second
            for job in self._jobs:
                job.stop()
            restore()
            log.info("worker stopped%s", "" if drained else " (grace period exceeded)")
        return drained

    def run_until_idle(self, *, timeout: float = 60.0) -> int:
        """Process due events in this thread until none is due; returns how many attempts ran.

        For tests, scripts and the README: no threads, no signals, no sleeping on retries.
        """
        self.store.ensure_schema()
        deadline = time.monotonic() + timeout
        attempts = 0
        self._sweep()
        while time.monotonic() < deadline:
            leased = self._lease(1)
            if not leased:
                return attempts
            for item in leased:
                self.processor.process(item)
                attempts += 1
        return attempts

    # -- the loop --------------------------------------------------------------------------

    def _loop(self, executor: ThreadPoolExecutor) -> None:
        next_sweep = 0.0
        while not self._stopping.is_set():
            if self._parent_gone():
                log.warning("parent process is gone; stopping")
                break
            self._wake.clear()
            if time.monotonic() >= next_sweep:
                self._sweep()
                next_sweep = time.monotonic() + self.options.sweep_interval
            free = self.options.concurrency - self._in_flight
            leased: list[Leased] = []
            if free > 0:
                try:
                    leased = self._lease(free)
                except StoreUnavailable as error:
                    log.warning("cannot lease events: %s", error)
                    self._stopping.wait(min(5.0, self._poll * 20))
                    continue
            for item in leased:
                with self._lock:
                    self._in_flight += 1
                executor.submit(self._process, item)
            if leased and len(leased) == free:
                self._wake.wait(self._poll)  # all slots busy: a finishing attempt wakes us
            elif not leased:
                self._wake.wait(self._idle_wait())

    def _process(self, leased: Leased) -> None:
        try:
            self.processor.process(leased)
        except Exception:  # a bug in hookinbox itself; the lease will expire and be swept
            log.exception("unexpected error processing %s", leased.event.id)
        finally:
            with self._lock:
                self._in_flight -= 1
            self._wake.set()

    def _lease(self, limit: int) -> list[Leased]:
        now = self.processor.now()
        if self._sqlite and not has_due(self.store, now):
            return []  # a read: polling SQLite must not take the write lock every 50 ms
        lease_until = now + timedelta(seconds=self.options.lease_seconds)
        return lease_due(self.store, limit=limit, now=now, lease_until=lease_until)

    def _sweep(self) -> None:
        try:
            swept = sweep_expired(
                self.store, now=self.processor.now(), decide=self.processor.expired
            )
        except StoreUnavailable as error:
            log.warning("cannot sweep expired leases: %s", error)
            return
        for event in swept:
            log.warning("%s %s: lease expired (worker lost); given back", event.source, event.id)

    def _idle_wait(self) -> float:
        if self._sqlite:
            return self._poll
        try:
            due = next_due_at(self.store)
        except StoreUnavailable:
            return self._poll
        if due is None:
            return self._poll
        return max(0.0, min(self._poll, (due - self.processor.now()).total_seconds()))

    def _drain(self) -> bool:
        deadline = time.monotonic() + self.options.grace_period
        while time.monotonic() < deadline:
            with self._lock:
                if self._in_flight == 0:
                    return True
            self._wake.wait(0.05)
            self._wake.clear()
        return False

    def _parent_gone(self) -> bool:
        return self.options.parent_pid is not None and os.getppid() != self.options.parent_pid

    def _install_signal_handlers(self) -> Callable[[], None]:
        in_main_thread = threading.current_thread() is threading.main_thread()
        if not self.options.handle_signals or not in_main_thread:
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def on_signal(signum: int, _frame: object) -> None:
            log.info("received %s; finishing attempts in flight", signal.Signals(signum).name)
            self.stop()

        for sig in previous:
            signal.signal(sig, on_signal)

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore
