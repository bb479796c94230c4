"""The async worker: the event queue and the relay as tasks on one event loop.

What the thread worker (`_worker.py`) does, on an `AsyncConnection`: one `AsyncLeaseLoop` per
queue, the same wake-ups (in-process, PostgreSQL's LISTEN through the sync store's listener
thread, serve's datagram on SQLite, the poll as the fallback), the same background jobs
(heartbeat, daily prune, periodic reconcile: threads on the sync store, as they were), and a
watchdog for handlers that block the loop. It runs as `hookinbox worker` with an async URL
(its own loop, SIGTERM and SIGINT handled), or inside an application's loop
(`async with inbox.running():`), where the application's server owns the signals.

Stop: no more leases; the items held and running finish within the grace period, and what a
stop cuts off is given back at once (`AsyncLeaseLoop.drain`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from types import CodeType
from typing import TYPE_CHECKING, Any

from hookinbox import _ranges as ranges
from hookinbox._logging import logger
from hookinbox._processing._async_loop import AsyncLeaseLoop, AsyncQueue
from hookinbox._processing._heartbeat import Heartbeat
from hookinbox._processing._service import Processing
from hookinbox._processing._wakeup import Wake, WakeSocket
from hookinbox._processing._watchdog import LoopWatchdog
from hookinbox._processing._worker import SQLITE_POLL, WOKEN_POLL, BackgroundJob, WorkerOptions

if TYPE_CHECKING:
    from hookinbox._storage import AsyncStore

log = logger("hookinbox.worker")

PARENT_CHECK = 1.0
"""Seconds between looks at the parent process (a worker `hookinbox serve` started)."""


class AsyncWorker:
    """Processes due events (and relays outbox messages) on the running event loop until
    `stop()`; `await worker.run()`."""

    def __init__(
        self,
        astore: AsyncStore,
        queues: Sequence[tuple[AsyncQueue[Any], int, Wake]],
        options: WorkerOptions | None = None,
        *,
        processing: Processing,
        in_threads: Processing,
        jobs: Sequence[BackgroundJob] = (),
        channels: Mapping[str, threading.Event] | None = None,
        code_names: Mapping[CodeType, str] | None = None,
    ) -> None:
        """`queues`: (queue, concurrency, wake-up) for each loop; `processing`: the service
        over `astore.store`, whose calls the loops run through the bridge; `in_threads`: the
        one over the inbox's own store (`astore.sync`), for what runs in threads (the
        heartbeat, LISTEN, the watchdog's give-backs); `channels`: PostgreSQL NOTIFY channel
        -> the wake-up it sets; `code_names`: the handlers' code, for the watchdog."""
        self.astore = astore
        self.processing = processing
        self.in_threads = in_threads
        self.options = options or WorkerOptions()
        self._queues = list(queues)
        default_poll = WOKEN_POLL if astore.dialect.listens else SQLITE_POLL
        self._poll = self.options.poll_interval or default_poll
        kind = "worker" if any(queue.name == "events" for queue, _, _ in queues) else "relay"
        self.heartbeat = Heartbeat(in_threads, kind, self.options.heartbeat_interval)
        self._jobs = [self.heartbeat, *jobs]
        self._channels = dict(channels or {})
        self._code_names = dict(code_names or {})
        self._stop_asked = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self.loops: list[AsyncLeaseLoop[Any]] = [
            AsyncLeaseLoop(queue, astore.run, processing, concurrency=concurrency,
                           poll=self._poll, wake=wake, stopping=asyncio.Event())
            for queue, concurrency, wake in self._queues
        ]  # fmt: skip

    # -- control ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop leasing; `run()` returns once the attempts in flight are done. From any thread."""
        self._stop_asked.set()
        loop, stopping = self._loop, self._stopping
        if loop is None or stopping is None:
            return
        try:
            if loop is asyncio.get_running_loop():
                stopping.set()
                return
        except RuntimeError:
            pass  # called from a thread with no loop
        loop.call_soon_threadsafe(stopping.set)

    @property
    def stopping(self) -> bool:
        return self._stop_asked.is_set()

    async def run(self) -> bool:
        """Work until stopped. True if every attempt in flight finished within the grace period."""
        await self.astore.ensure_schema()
        self._loop = loop = asyncio.get_running_loop()
        self._stopping = stopping = asyncio.Event()  # this loop's
        if self._stop_asked.is_set():
            stopping.set()
        for each in self.loops:
            each.stopping = stopping
        restore = self._install_signal_handlers(loop)
        listener = None
        if self.astore.dialect.listens and self._channels:
            listener = self.in_threads.listener(self._channels, self._stop_asked)
            listener.start()
        wake_socket = self._wake_socket()
        for job in self._jobs:
            job.start()
        watchdog = LoopWatchdog(self._code_names, self._blocked)
        watchdog.start()
        tasks = [asyncio.create_task(each.run(), name=f"hookinbox-{each.queue.name}-loop")
                 for each in self.loops]  # fmt: skip
        log.info(
            "worker started on the event loop (%s)",
            ", ".join(f"{each.queue.name}: concurrency {each.concurrency}" for each in self.loops),
        )
        try:
            while not stopping.is_set():
                try:
                    await asyncio.wait_for(stopping.wait(), PARENT_CHECK)
                except TimeoutError:
                    if self._parent_gone():
                        log.warning("parent process is gone; stopping")
                        self.stop()
        finally:
            self._stop_asked.set()
            stopping.set()
            deadline = time.monotonic() + self.options.grace_period
            await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
            drained = all([await each.drain(deadline) for each in self.loops])
            for task in tasks:
                task.cancel()
            watchdog.stop()
            if listener is not None:
                await asyncio.to_thread(listener.join, 2.0)  # it checks the flag every second
            if wake_socket is not None:
                wake_socket.close()
            for job in self._jobs:
                await asyncio.to_thread(job.stop)
            if drained:
                await asyncio.to_thread(self.heartbeat.forget)
            restore()
            # The pool's connections belong to this loop: an inbox run again on another
            # (`process_due`, a test's) opens its own.
            await self.astore.dispose()
            log.info("worker stopped%s", "" if drained else " (grace period exceeded)")
        return drained

    async def run_until_idle(self, *, timeout: float = 60.0) -> int:
        """Process due items on this task until none is due; returns how many attempts ran.
        Events first, then the messages their handlers sent, until both queues are empty."""
        ranges.RUN_TIMEOUT.check("timeout", timeout)
        await self.astore.ensure_schema()
        stopping = asyncio.Event()
        loops = [
            AsyncLeaseLoop(queue, self.astore.run, self.processing, concurrency=concurrency,
                           poll=self._poll, wake=wake, stopping=stopping)
            for queue, concurrency, wake in self._queues
        ]  # fmt: skip
        deadline = time.monotonic() + timeout
        total = 0
        while time.monotonic() < deadline:
            done = 0
            for each in loops:
                done += await each.run_until_idle(deadline)
            total += done
            if done == 0:
                break
        return total

    # -- around the loops --------------------------------------------------------------------

    def _blocked(self, seconds: float, culprit: str) -> None:
        """From the watchdog's thread, while the loop is blocked: say so, and give back what
        this worker holds but has not started (another worker may take it now)."""
        given = 0
        for each in self.loops:
            while True:
                try:
                    item = each.held.popleft()
                except IndexError:
                    break
                try:
                    given += bool(each.queue.give_back(self.in_threads, item))
                except Exception as error:  # the database, or SQLite's lock the handler holds
                    log.warning("could not give back a held %s item: %s", each.queue.name, error)
        log.warning(
            "the event loop has been blocked for %.1f s by %s: every other event waits; run "
            "blocking code in a thread (asyncio.to_thread). %d held item(s) given back",
            seconds,
            culprit,
            given,
            extra={"handler": culprit, "blocked_seconds": round(seconds, 1)},
        )

    def _wake_socket(self) -> WakeSocket | None:
        path = self.options.wake_socket
        if path is None or self.astore.dialect.listens:
            return None  # on PostgreSQL, LISTEN/NOTIFY wakes the worker from any host
        events: list[threading.Event] = [w for q, _, w in self._queues if q.name == "events"]
        receiver = WakeSocket(path, events, self._stop_asked)
        if not receiver.bind():
            return None
        receiver.start()
        if self.options.poll_interval is None:
            for each in self.loops:
                each.poll = WOKEN_POLL
        return receiver

    def _parent_gone(self) -> bool:
        return self.options.parent_pid is not None and os.getppid() != self.options.parent_pid

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> Any:
        in_main_thread = threading.current_thread() is threading.main_thread()
        if not self.options.handle_signals or not in_main_thread:
            return lambda: None
        signals = (signal.SIGTERM, signal.SIGINT)

        def on_signal(signum: int) -> None:
            log.info("received %s; finishing attempts in flight", signal.Signals(signum).name)
            self.stop()

        for sig in signals:
            loop.add_signal_handler(sig, on_signal, sig)

        def restore() -> None:
            for sig in signals:
                loop.remove_signal_handler(sig)

        return restore
