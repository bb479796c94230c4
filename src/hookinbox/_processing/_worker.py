"""The worker: an event loop, a relay loop for the outbox, the daily jobs, and clean shutdowns.

Wake-ups: an in-process signal when ingest runs in the same process, PostgreSQL
LISTEN/NOTIFY across processes, a datagram from `hookinbox serve`'s HTTP processes on SQLite
(`_wakeup.py`, when `wake_socket` is set), and polling as the fallback: 1 s where something
wakes the worker (PostgreSQL's NOTIFY, serve's datagram), 50 ms on SQLite otherwise, where a
due check is a cheap read. When idle, the worker also sleeps no longer than until the soonest
scheduled retry.

While it runs, the worker beats (`_heartbeat.py`): operators see it alive, per host.

SIGTERM or SIGINT: stop leasing, let the attempts in flight finish within the grace period,
return. Attempts cut off by the grace period roll back with the process and are retried after
their lease expires.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from hookinbox import _ranges as ranges
from hookinbox._logging import logger
from hookinbox._processing._heartbeat import Heartbeat
from hookinbox._processing._loop import LeaseLoop, WorkQueue
from hookinbox._processing._service import Processing
from hookinbox._processing._wakeup import WakeSocket

log = logger("hookinbox.worker")

SQLITE_POLL = 0.05
"""Seconds between due checks on SQLite when nothing wakes the worker."""
WOKEN_POLL = 1.0
"""Seconds between due checks when something wakes the worker on each new event (NOTIFY on
PostgreSQL, serve's datagram on SQLite): the poll is only the fallback then."""


class BackgroundJob(Protocol):
    """A thread the worker starts with itself and stops with itself (the daily pruner)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    concurrency: int = 4
    """Events processed at once (threads). On SQLite, handlers take turns on the write lock."""
    relay_concurrency: int = 4
    """Outbox messages delivered at once (threads); deliveries run outside any transaction."""
    lease_seconds: float = 60.0
    """How long a worker may hold an event before another assumes it died (the next lease then
    takes the event back). Correctness does not depend on it (the processing transaction holds
    the event's queue row); it only bounds how soon an event held by a killed worker is
    retried."""
    poll_interval: float | None = None
    """Seconds between checks when nothing wakes the worker; None: 1.0 on PostgreSQL and with a
    `wake_socket`, else 0.05 on SQLite."""
    sweep_interval: float | None = None
    """Deprecated, and unused since schema 9: expired leases are taken back by the next lease
    (docs/api.md, "Deprecations")."""
    grace_period: float = 30.0
    """On shutdown, seconds to let attempts in flight finish."""
    handle_signals: bool = True
    """Install SIGTERM/SIGINT handlers (only from the main thread); off when embedded."""
    parent_pid: int | None = None
    """Stop when this process is gone (a worker started by `hookinbox serve`)."""
    wake_socket: str | None = None
    """On SQLite, a path to bind a UNIX datagram socket at: each datagram wakes the event loop.
    `hookinbox serve` passes one, and its HTTP processes send a datagram after each commit that
    stored a new event. The poll stays the fallback for wake-ups lost or never sent."""
    heartbeat_interval: float = 10.0
    """Seconds between heartbeats (`hookinbox_workers`); the process counts as alive for three
    intervals after each one."""

    def __post_init__(self) -> None:
        for name, limits in _WORKER_RANGES.items():
            limits.check(name, getattr(self, name))
        ranges.POLL_INTERVAL.check_optional("poll_interval", self.poll_interval)
        ranges.SWEEP_INTERVAL.check_optional("sweep_interval", self.sweep_interval)
        ranges.PROCESS_ID.check_optional("parent_pid", self.parent_pid)
        if self.sweep_interval is not None:
            warnings.warn(
                "WorkerOptions(sweep_interval=...) has no effect since schema 9 and is removed in "
                "hookinbox 0.3.0: an expired lease is taken back by the next lease; leave it out",
                DeprecationWarning,
                stacklevel=3,
            )


_WORKER_RANGES = {
    "concurrency": ranges.CONCURRENCY,
    "relay_concurrency": ranges.CONCURRENCY,
    "lease_seconds": ranges.LEASE_SECONDS,
    "grace_period": ranges.GRACE_PERIOD,
    "heartbeat_interval": ranges.HEARTBEAT_INTERVAL,
}
"""The ranges `hookinbox worker`'s flags take too (`cli/_options.py`): a `nan` lease processed
nothing, a `nan` poll spun, a `nan` grace period dropped the drain, a `nan` heartbeat
interval killed the heartbeat thread."""


class Worker:
    """Processes due events (and relays outbox messages) until `stop()` is called."""

    def __init__(
        self,
        processing: Processing,
        queues: Sequence[tuple[WorkQueue[Any], int, threading.Event]],
        options: WorkerOptions | None = None,
        *,
        jobs: Sequence[BackgroundJob] = (),
        channels: Mapping[str, threading.Event] | None = None,
    ) -> None:
        """`processing`: the service the queues and the heartbeat ask (the schema, LISTEN);
        `queues`: (queue, concurrency, wake-up event) for each loop to run.

        `channels`: PostgreSQL NOTIFY channel -> the wake-up event it sets.
        """
        self.processing = processing
        self.options = options or WorkerOptions()
        self._stopping = threading.Event()
        default_poll = WOKEN_POLL if processing.dialect.listens else SQLITE_POLL
        poll = self.options.poll_interval or default_poll
        self.loops = [
            LeaseLoop(
                queue,
                concurrency=concurrency,
                poll=poll,
                wake=wake,
                stopping=self._stopping,
            )
            for queue, concurrency, wake in queues
        ]
        kind = "worker" if any(loop.queue.name == "events" for loop in self.loops) else "relay"
        self.heartbeat = Heartbeat(processing, kind, self.options.heartbeat_interval)
        self._jobs = [self.heartbeat, *jobs]
        self._channels = dict(channels or {})

    # -- control ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing; `run()` returns once the attempts in flight are done."""
        self._stopping.set()
        for loop in self.loops:
            loop.wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self) -> bool:
        """Work until stopped. True if every attempt in flight finished within the grace period."""
        self.processing.ensure_schema()
        restore = self._install_signal_handlers()
        listener = None
        if self.processing.dialect.listens and self._channels:
            listener = self.processing.listener(self._channels, self._stopping)
            listener.start()
        # Bound before the loops start (and before the first heartbeat, which tells the
        # server's tests that this worker is up): a commit from then on wakes it.
        wake_socket = self._wake_socket()
        for job in self._jobs:
            job.start()
        threads = [
            # Daemons: a loop blocked on the database (SQLite's lock, held by a slow handler)
            # must not keep the process alive past the grace period.
            threading.Thread(target=loop.run, name=f"hookinbox-{loop.queue.name}-loop", daemon=True)
            for loop in self.loops
        ]
        for thread in threads:
            thread.start()
        log.info(
            "worker started (%s)",
            ", ".join(f"{loop.queue.name}: concurrency {loop.concurrency}" for loop in self.loops),
        )
        try:
            while not self._stopping.wait(1.0):
                if self._parent_gone():
                    log.warning("parent process is gone; stopping")
                    self.stop()
        finally:
            self.stop()
            deadline = time.monotonic() + self.options.grace_period
            for thread in threads:
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
            drained = all([loop.drain(deadline) for loop in self.loops])
            drained = drained and not any(thread.is_alive() for thread in threads)
            if listener is not None:
                listener.join(timeout=2.0)  # it checks the stop flag every second
            if wake_socket is not None:
                wake_socket.close()
            for job in self._jobs:
                job.stop()
            if drained:
                self.heartbeat.forget()
            restore()
            log.info("worker stopped%s", "" if drained else " (grace period exceeded)")
        return drained

    def run_until_idle(self, *, timeout: float = 60.0) -> int:
        """Process due items in this thread until none is due; returns how many attempts ran.

        For tests, scripts and the README: no threads, no signals, no sleeping on retries.
        Events first, then the messages their handlers sent, until both queues are empty.
        """
        ranges.RUN_TIMEOUT.check("timeout", timeout)  # nan ran nothing and said nothing
        self.processing.ensure_schema()
        deadline = time.monotonic() + timeout
        total = 0
        while time.monotonic() < deadline:
            done = sum(loop.run_until_idle(deadline) for loop in self.loops)
            total += done
            if done == 0:
                break
        return total

    def _wake_socket(self) -> WakeSocket | None:
        """The bound wake-up socket's thread, started; None without one (or if it cannot be
        bound: the worker then polls, logged)."""
        path = self.options.wake_socket
        if path is None or self.processing.dialect.listens:
            return None  # on PostgreSQL, LISTEN/NOTIFY wakes the worker from any host
        events = [loop.wake for loop in self.loops if loop.queue.name == "events"]
        receiver = WakeSocket(path, events, self._stopping)
        if not receiver.bind():
            return None
        receiver.start()
        if self.options.poll_interval is None:
            # Woken on each new event, the worker polls only for what nothing announces (a
            # replay, another process's delivery, an outbox message of an inline handler), as
            # on PostgreSQL; retries coming due are looked ahead for (`idle_wait`).
            for loop in self.loops:
                loop.poll = WOKEN_POLL
        return receiver

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
