"""`LeaseLoop`'s rhythm on one event loop: tasks instead of threads.

`concurrency` tasks each take their next item from what the loop holds; when none is held,
one task at a time leases a batch for all (up to `2 x concurrency` minus the items being
processed, as the thread loop does) or sleeps while nothing is due, until woken, a poll
interval passes, or the soonest retry comes. No item is handed from one task to another.
Leasing, the due check and the look-ahead are the sync queue's own code (`StoreQueue`), run
through the async store's greenlet bridge: the statements, the unrecorded outcomes written
first, the items of a dead process given back, all shared with the thread worker.

On stop, nothing more is leased; the items held are started and finished within the grace
period (`drain`); what is still running then is cancelled (its transaction rolls back) and,
with what was never started, given back due at once without counting an attempt
(`abandon`): a stop never doubles an effect, and never costs an event an attempt.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger
from hookinbox._processing._async_processor import AsyncProcessor
from hookinbox._processing._loop import PREFETCH, WorkQueue
from hookinbox._processing._queues import EventQueue
from hookinbox._processing._wakeup import Wake
from hookinbox._records import Leased

if TYPE_CHECKING:
    from hookinbox._processing._service import Processing

log = logger("hookinbox.worker")

T = TypeVar("T")

ABANDON_TIMEOUT = 5.0
"""Seconds a shutdown gives the database to take back what it cut off (then leases expire)."""


class AsyncQueue(Protocol[T]):
    """One queue as the async loop runs it: the sync queue's leasing, an awaited `process`."""

    @property
    def name(self) -> str: ...

    @property
    def leasing(self) -> WorkQueue[T]:
        """The sync queue whose `lease` and `idle_wait` run through the greenlet bridge."""

    def process(self, item: T) -> Awaitable[object]: ...

    def give_back(self, processing: Processing, item: T) -> bool:
        """Give `item` back through `processing` (sync code: the async store's through the
        bridge, or the inbox's own from a thread)."""


class AsyncEventQueue:
    """The event queue on the async worker: `EventQueue` leases, `AsyncProcessor` processes."""

    name = "events"

    def __init__(self, leasing: EventQueue, processor: AsyncProcessor) -> None:
        self.leasing = leasing
        self.processor = processor

    def process(self, item: Leased) -> Awaitable[str]:
        return self.processor.process(item)

    def give_back(self, processing: Processing, item: Leased) -> bool:
        now = datetime.fromtimestamp(self.processor.processor.clock(), UTC)
        return processing.give_back_event(item.event.row_id, item.token, now)


class AsyncLeaseLoop(Generic[T]):
    def __init__(
        self,
        queue: AsyncQueue[T],
        run: Callable[..., Awaitable[Any]],
        processing: Processing,
        *,
        concurrency: int,
        poll: float,
        wake: Wake,
        stopping: asyncio.Event,
    ) -> None:
        """`run`: the async store's bridge (`AsyncStore.run`); `processing`: the processing
        service over the store it runs sync code on."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.run_sync = run
        self.processing = processing
        self.concurrency = concurrency
        self.poll = poll
        self.wake = wake
        self.stopping = stopping
        self.held: deque[T] = deque()
        """Leased, not yet started (the watchdog may give them back from its thread)."""
        self._current: dict[asyncio.Task[None], T] = {}
        """What each task is processing now."""
        self._tasks: list[asyncio.Task[None]] = []
        self._leasing = False
        self._change = asyncio.Event()
        """Set, and replaced by a new one, at each change (an item done, a lease ended): a
        waiter holds the event it took before looking, so no change is missed."""

    @property
    def busy(self) -> bool:
        return bool(self.held or self._current)

    async def run(self) -> None:
        """`concurrency` tasks lease and process until `stopping` is set and what they hold
        is done (`drain` bounds that)."""
        waker = self.wake.watch()
        self._tasks = [
            asyncio.create_task(self._work(waker), name=f"hookinbox-{self.queue.name}-{number}")
            for number in range(self.concurrency)
        ]
        try:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            self.wake.unwatch(waker)

    async def drain(self, deadline: float) -> bool:
        """Wait (until the monotonic `deadline`) for the items held and running; then cancel
        what still runs and give it back, with anything never started. True if nothing was
        cut off."""
        while time.monotonic() < deadline:
            change = self._change
            if not self.busy:
                break
            try:
                await asyncio.wait_for(change.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
        if not self.busy:
            return True
        cut = list(self._current.values()) + list(self.held)
        self.held.clear()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._abandon(cut)
        return False

    async def run_until_idle(self, deadline: float) -> int:
        """One item at a time, on this task, until none is due; returns the count."""
        done = 0
        while time.monotonic() < deadline:
            leased = await self.run_sync(self.queue.leasing.lease, 1)
            if not leased:
                break
            for item in leased:
                await self.queue.process(item)
                done += 1
        return done

    async def _work(self, waker: asyncio.Event) -> None:
        """One task's life: the next item held, else the lease (one task at a time leases
        for all, or sleeps until woken or due, while the others wait for it)."""
        me = asyncio.current_task()
        assert me is not None
        while (item := await self._take(waker)) is not None:
            self._current[me] = item
            try:
                await self.queue.process(item)
            except Exception:  # a bug in hookinbox itself; the lease will expire and be swept
                log.exception("unexpected error processing a %s item", self.queue.name)
            finally:
                del self._current[me]
                self._changed()

    def _changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    async def _take(self, waker: asyncio.Event) -> T | None:
        while True:
            change = self._change
            if self.held:
                return self.held.popleft()
            if self.stopping.is_set():
                return None
            if self._leasing:  # another task leases for everyone: wait for what it finds
                await _wait_any(change, self.stopping, timeout=1.0)
                continue
            self._leasing = True
            try:
                self.held.extend(await self._lease_or_sleep(waker))
            finally:
                self._leasing = False
                self._changed()

    async def _lease_or_sleep(self, waker: asyncio.Event) -> list[T]:
        waker.clear()
        self.wake.clear()
        limit = max(1, PREFETCH * self.concurrency - len(self._current))
        try:
            leased: list[T] = await self.run_sync(self.queue.leasing.lease, limit)
        except StoreUnavailable as error:
            log.warning("cannot lease %s: %s", self.queue.name, error)
            await _wait(self.stopping, min(5.0, self.poll * 20))
            return []
        if leased:
            return leased
        try:
            idle = await self.run_sync(self.queue.leasing.idle_wait, self.poll)
        except StoreUnavailable:
            idle = self.poll
        await _wait_any(waker, self.stopping, timeout=idle)
        return []

    async def _abandon(self, items: list[T]) -> None:
        """Give back, due now and with no attempt counted, what a stop cut off: a cancelled
        attempt rolled back, so nothing of it was kept (a claim that did commit has already
        ended the lease, and giving it back then matches nothing)."""
        given = 0
        for item in items:
            try:
                run = self.run_sync(self.queue.give_back, self.processing, item)
                given += bool(await asyncio.wait_for(run, ABANDON_TIMEOUT))
            except (StoreUnavailable, TimeoutError) as error:
                log.warning("could not give back a %s item at shutdown: %s", self.queue.name,
                            error or "timed out")  # fmt: skip
        if items:
            log.warning("%s: %d item(s) cut off by the grace period, %d given back due now",
                        self.queue.name, len(items), given)  # fmt: skip


async def _wait(event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        pass


async def _wait_any(*events: asyncio.Event, timeout: float) -> None:
    """Until one of `events` is set or `timeout` seconds pass."""
    if any(event.is_set() for event in events):
        return
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
