"""Group commit: concurrent deliveries share one statement, one transaction and one commit.

Requests hand their delivery to `GroupCommitter.submit` and wait on the returned future. A
writer thread takes everything that is waiting (up to `max_rows`), stores it with
`record_deliveries` in one transaction, and only after the commit resolves each future (one
writer by default; on PostgreSQL `writers` may add more, each with its own connection, so that
the next batch goes out while one is in flight; SQLite has one writer whatever the count). So:

- a delivery is answered only once the commit that holds its row has returned;
- if the batch fails, every delivery in it gets the error (503 for an unavailable database),
  and the rollback leaves nothing of it behind; a batch the database chose as a deadlock's
  victim (MariaDB, PostgreSQL) is first written again, twice at most
  (`Store.retry_deadlocks`). An error that is not about availability (a row the database
  refuses) is retried one delivery per transaction, so that one bad row cannot fail the
  deliveries it happened to share a batch with;
- a delivery whose request gave up waiting (the ack deadline passed, `record(timeout=...)` or
  a cancelled `asyncio.wrap_future`) is dropped if no writer has taken it yet; once taken, it
  is written, and the provider's retry of it is answered as a duplicate;
- a batched delivery (several events in one request: SendGrid, HubSpot, Adyen) is one item
  of the queue: its events go into the same batch, never split across two, so they commit
  together or not at all (`submit_batch`). A batch holding one goes in one transaction on
  PostgreSQL too, since a key conflict can split a batch into several statements. On
  PostgreSQL a batched delivery is not queued for the shared writers at all: it is written in
  a transaction of its own by a small pool of batch threads, with the writers' statement
  timeout. A redelivered batch whose row a slow handler holds waits for that row (and may be
  answered 503); on the shared writer it made every delivery of the process wait with it;
- a waiter that gave up may name a `late` callback: it hears what became of its delivery
  after all (stored, or failed), which the receiver logs as "after the ack deadline";
- the batching adapts by itself: while one batch commits, the next one gathers. A lone
  request is written at once (no timer to wait out); under load, batches grow with the
  arrival rate up to `max_rows`. `max_wait` can add a short wait for more rows, but only while
  the previous batch had company, so a lone request still goes straight through.

A thread rather than an asyncio task: storage is synchronous SQLAlchemy, shared by the sync
`Inbox.receive` (Flask, Django) and the ASGI app. A synchronous caller waits on a future from
`concurrent.futures` (`submit`); a caller on an asyncio event loop gets an asyncio future of
its loop (`submit_async`), and the writer resolves all of a batch's futures of one loop with
ONE `call_soon_threadsafe`: wrapping a thread's future per delivery (`asyncio.wrap_future`)
cost the loop a wake-up, a callback and a second future for every delivery, about a tenth of
a saturated server's CPU.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures import wait as wait_for_all
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection

from hookinbox import _ranges as ranges
from hookinbox._errors import AckDeadlinePassed, StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import observe_batch
from hookinbox._model import NewDelivery, RecordedDelivery, Status
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._ingest import INGEST, Ingest

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

log = logger("hookinbox._storage")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GroupCommit:
    """How concurrent deliveries are grouped into one transaction (`Inbox(group_commit=...)`)."""

    max_rows: int = 256
    """The largest batch (at most 2,000: SQLite bounds the values of one statement)."""
    max_wait: float = 0.0
    """Seconds a batch may wait for more deliveries once the inbox is busy (0: never wait)."""
    writers: int | None = None
    """Writer threads per process on PostgreSQL, each with its own connection, so that one
    batch goes out while another is in flight. None: 1, which measured best on a database
    next to the server (fewer, larger batches: less CPU per delivery in both processes); more
    may help where each commit waits long (a distant or synchronously replicated primary).
    SQLite always has 1 (one writer)."""

    def __post_init__(self) -> None:
        ranges.GROUP_MAX_ROWS.check("max_rows", self.max_rows)
        ranges.GROUP_MAX_WAIT.check("max_wait", self.max_wait)
        ranges.GROUP_WRITERS.check_optional("writers", self.writers)


Late = Callable[[Any], None]
"""Told what became of a delivery whose waiter gave up after a writer took it: its result,
or the exception its write raised. Called on the waiter's event loop, or in the writer's
thread for a synchronous waiter; it must not block."""

BATCH_THREADS = 4
"""Threads writing PostgreSQL's batched deliveries, each in its own transaction: batches
waiting for rows (a slow handler's) hold these and a pooled connection each, never the
shared writers."""


class _LoopWaiter:
    """The asyncio future of a delivery submitted from an event loop, and that loop."""

    __slots__ = ("future", "late", "loop")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], late: Late | None
    ) -> None:
        self.loop = loop
        self.future = future
        self.late = late

    def set_running_or_notify_cancel(self) -> bool:
        """False if the waiter gave up (its ack deadline passed) before a writer took it."""
        return not self.future.cancelled()


_Waiter = Future[Any] | _LoopWaiter
_Pending = tuple[NewDelivery | tuple[NewDelivery, ...], _Waiter]
"""A delivery and its waiter, or a batched delivery's events and theirs (resolved with a list)."""
_STOP = object()


class GroupCommitter:
    """Writer threads storing batches of deliveries for the threads and tasks that wait."""

    def __init__(
        self,
        store: StoreSeam,
        options: GroupCommit | None = None,
        *,
        statement_timeout: float | None = None,
        on_new_event: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self._ingest = Ingest(store)
        self.options = options or GroupCommit()
        # Called by the writer thread once per commit that stored a new event to process,
        # before the waiters hear of it: it wakes a worker in another process (`hookinbox
        # serve` on SQLite). It must not block or raise.
        self.on_new_event = on_new_event
        # PostgreSQL: a batch statement stuck behind a lock is cancelled after this many
        # seconds, so that the batches queued behind it are not held up for as long as the lock
        # (its requests have been answered 503 at their ack deadline by then).
        self.statement_timeout = statement_timeout
        self._queue: queue.SimpleQueue[_Pending | object] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._local = threading.local()  # each writer's own connection (PostgreSQL)
        self._batches: ThreadPoolExecutor | None = None  # PostgreSQL's batched deliveries
        self._batch_writes: set[Future[None]] = set()

    @property
    def writers(self) -> int:
        if self.store.dialect.single_writer:
            return 1
        return self.options.writers or 1

    def submit(self, delivery: NewDelivery) -> Future[RecordedDelivery]:
        """Queue `delivery`; the future resolves once its row is committed (or fails)."""
        future: Future[RecordedDelivery] = Future()
        self._put((delivery, future))
        return future

    def submit_batch(self, events: tuple[NewDelivery, ...]) -> Future[list[RecordedDelivery]]:
        """Queue the events of one batched delivery; they are written in one transaction."""
        future: Future[list[RecordedDelivery]] = Future()
        self._put((events, future))
        return future

    def submit_async(
        self, delivery: NewDelivery | tuple[NewDelivery, ...], *, late: Late | None = None
    ) -> asyncio.Future[Any]:
        """`submit` (or, given a batched delivery's events, `submit_batch`) for a caller on a
        running asyncio loop: the future is that loop's, resolved on it once committed.
        Cancelling it (a passed ack deadline) drops the delivery unless a writer has it; if
        one has, `late` is told the outcome instead."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._put((delivery, _LoopWaiter(loop, future, late)))
        return future

    def _put(self, pending: _Pending) -> None:
        if not isinstance(pending[0], NewDelivery) and not self.store.dialect.single_writer:
            self._put_batch(pending)
            return
        if not self._threads:
            self._start()
        # Under the lock that `close` takes to set `_closed`: a delivery is either queued
        # before the writers' stop markers (and stored) or refused, never left waiting.
        with self._lock:
            if self._closed:
                _refuse(pending[1])
                return
            self._queue.put(pending)

    def _put_batch(self, pending: _Pending) -> None:
        """A batched delivery on PostgreSQL: to a batch thread, off the shared writers."""
        with self._lock:
            if not self._closed:
                if self._batches is None:
                    self._batches = ThreadPoolExecutor(BATCH_THREADS, "hookinbox-batch")
                written = self._batches.submit(self._write_batch, pending)
                self._batch_writes.add(written)
                written.add_done_callback(self._forget_write)
                return
        _refuse(pending[1])

    def _forget_write(self, written: Future[None]) -> None:
        with self._lock:
            self._batch_writes.discard(written)

    def _write_batch(self, pending: _Pending) -> None:
        batch: list[_Pending] = []
        if _take(batch, pending):  # unless its waiter gave up while it waited for a thread
            self._flush(batch)

    def record(
        self, delivery: NewDelivery, timeout: float | None = None, *, late: Late | None = None
    ) -> RecordedDelivery:
        """Blocking form of `submit`, for synchronous callers.

        Past `timeout` seconds, raise `AckDeadlinePassed`: the delivery is dropped if no writer
        has taken it yet, and written anyway (its retry is then a duplicate) if one has; `late`
        then hears how that went.
        """
        return _wait(self.submit(delivery), timeout, late)

    def record_batch(
        self,
        events: tuple[NewDelivery, ...],
        timeout: float | None = None,
        *,
        late: Late | None = None,
    ) -> list[RecordedDelivery]:
        """Blocking form of `submit_batch`, with `record`'s deadline."""
        return _wait(self.submit_batch(events), timeout, late)

    def close(self, timeout: float = 10.0) -> None:
        """Store what is queued, then stop the writer threads."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            batches, batch_writes = self._batches, list(self._batch_writes)
        for _ in threads:
            self._queue.put(_STOP)  # each writer takes one and stops
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if batches is not None:
            # The batches already handed over are written (each within its statement
            # timeout), as far as `timeout` allows; the threads stop once they are.
            wait_for_all(batch_writes, max(0.0, deadline - time.monotonic()))
            batches.shutdown(wait=False)

    def _start(self) -> None:
        with self._lock:
            if not self._threads and not self._closed:
                self._threads = [
                    threading.Thread(
                        target=self._run, name=f"hookinbox-group-commit-{n}", daemon=True
                    )
                    for n in range(self.writers)
                ]
                for thread in self._threads:
                    thread.start()

    def _run(self) -> None:
        busy = False
        try:
            while True:
                first = self._queue.get()
                if first is _STOP:
                    return
                batch: list[_Pending] = []
                _take(batch, first)
                stopping = self._gather(batch, wait=self.options.max_wait if busy else 0.0)
                busy = len(batch) > 1
                if batch:
                    self._flush(batch)
                if stopping:
                    return
        finally:
            self._drop_connection()

    def _gather(self, batch: list[_Pending], wait: float) -> bool:
        """Add what is already queued (and, with `wait`, what arrives within it); True on stop.

        `max_rows` counts events: a batched delivery's events all go in, so a batch may pass
        it by one delivery's events (the SQLite statements are cut to stay within bounds)."""
        deadline = time.monotonic() + wait
        rows = sum(_rows(pending) for pending in batch)
        while rows < self.options.max_rows:
            try:
                remaining = deadline - time.monotonic()
                item = (
                    self._queue.get(timeout=remaining)
                    if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                return False
            if item is _STOP:
                return True
            if _take(batch, item):
                rows += _rows(batch[-1])
        return False

    def _flush(self, batch: list[_Pending]) -> None:
        deliveries: list[NewDelivery] = []
        batched = False
        for item, _ in batch:
            if isinstance(item, NewDelivery):
                deliveries.append(item)
            else:
                deliveries.extend(item)
                batched = True
        answers = _Answers()
        try:
            results = self._write(deliveries, atomic=batched)
        except StoreUnavailable as error:
            for _, waiter in batch:
                answers.fail(waiter, error)
            answers.send()
            return
        except Exception as error:
            if len(batch) == 1:
                answers.fail(batch[0][1], error)
                answers.send()
                return
            log.warning("a batch of %d deliveries failed (%r); storing them one by one",
                        len(batch), error)  # fmt: skip
            for pending in batch:
                self._flush([pending])
            return
        observe_batch(len(deliveries))
        if self.on_new_event is not None and any(
            recorded.is_new and recorded.status is Status.PENDING for recorded in results
        ):
            self.on_new_event()
        start = 0
        for item, waiter in batch:
            if isinstance(item, NewDelivery):
                answers.succeed(waiter, results[start])
                start += 1
            else:
                answers.succeed(waiter, results[start : start + len(item)])
                start += len(item)
        answers.send()

    def _write(self, deliveries: list[NewDelivery], *, atomic: bool) -> list[RecordedDelivery]:
        """Store `deliveries`; `atomic` (a batched delivery among them) keeps them in one
        transaction on PostgreSQL too, where the batch statements otherwise autocommit."""
        dialect = self.store.dialect
        if not dialect.autocommit_batches or atomic:

            def write() -> list[RecordedDelivery]:
                with self.store.transaction() as transaction:
                    if self.statement_timeout is not None:
                        # A batch's transaction waits for a held row no longer than the
                        # writers' statements do (where the database can say so).
                        dialect.limit_statements(transaction, self.statement_timeout, local=True)
                    return self._ingest.record_batch(transaction, deliveries)

            # A deadlock's victim (MariaDB: a batch locks many rows, a rival may lock two of
            # them in the other order) is written again before its waiters hear of it.
            return self.store.retry_deadlocks(write, INGEST)
        # Each batch is one atomic statement (PostgreSQL), run in autocommit on a connection
        # this thread keeps (checking one out would cost the pool's ping, a round trip).
        self.store.ensure_schema()
        try:
            with translate_errors():
                connection: Connection | None = getattr(self._local, "connection", None)
                if connection is None:
                    connection = self.store.engine.connect().execution_options(
                        isolation_level="AUTOCOMMIT"
                    )
                    self._local.connection = connection
                    if self.statement_timeout is not None:
                        self.store.dialect.limit_statements(connection, self.statement_timeout)
                return self._ingest.record_batch(connection, deliveries)
        except Exception:
            self._drop_connection()
            raise

    def _drop_connection(self) -> None:
        """This writer's connection, after an error (it may be broken) or on exit."""
        connection: Connection | None = getattr(self._local, "connection", None)
        if connection is not None:
            try:
                connection.invalidate()
                connection.close()
            except Exception:  # it is being thrown away: nothing to save
                log.debug("closing a failed group-commit connection", exc_info=True)
            self._local.connection = None


class _Answers:
    """A batch's results for its waiters: a thread's future is resolved at once; the futures
    of an event loop are resolved on it, all of them in one callback (`send`)."""

    def __init__(self) -> None:
        self._on_loops: dict[asyncio.AbstractEventLoop, list[_Answer]] = {}

    def succeed(self, waiter: _Waiter, result: object) -> None:
        if isinstance(waiter, _LoopWaiter):
            answer = (waiter.future, result, waiter.late)
            self._on_loops.setdefault(waiter.loop, []).append(answer)
        else:
            waiter.set_result(result)

    def fail(self, waiter: _Waiter, error: BaseException) -> None:
        if isinstance(waiter, _LoopWaiter):
            answer = (waiter.future, _Failure(error), waiter.late)
            self._on_loops.setdefault(waiter.loop, []).append(answer)
        else:
            waiter.set_exception(error)

    def send(self) -> None:
        for loop, answers in self._on_loops.items():
            try:
                loop.call_soon_threadsafe(_resolve, answers)
            except RuntimeError:  # the loop is closed: nobody is left waiting on it
                log.debug("an event loop closed before its deliveries were answered")


class _Failure:
    """An error to raise in a loop's waiter (a result could be an exception object)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_Answer = tuple[asyncio.Future[Any], Any, Late | None]
"""A loop's future, its result (or `_Failure`), and who hears of it if the waiter gave up."""


def _resolve(answers: list[_Answer]) -> None:
    """On the waiters' loop: answer each future whose waiter is still there, and tell each
    `late` callback what became of a delivery whose waiter gave up (503 at its deadline)."""
    for future, result, late in answers:
        outcome = result.error if isinstance(result, _Failure) else result
        if future.done():  # cancelled at its ack deadline: answered 503 already
            if late is not None:
                _tell(late, outcome)
            continue
        if isinstance(result, _Failure):
            future.set_exception(result.error)
        else:
            future.set_result(result)


def _tell(late: Late, outcome: object) -> None:
    try:
        late(outcome)
    except Exception:  # a log line that failed must not fail the other answers
        log.exception("reporting a delivery stored after its ack deadline failed")


def _refuse(waiter: _Waiter) -> None:
    refused = StoreUnavailable("shutting down: not accepting deliveries")
    if isinstance(waiter, _LoopWaiter):
        waiter.future.set_exception(refused)  # on its own loop: the caller's
    else:
        waiter.set_exception(refused)


def _take(batch: list[_Pending], item: object) -> bool:
    """Add a queued delivery to `batch`, unless its waiter gave up (cancelled its future)."""
    pending: _Pending = item  # type: ignore[assignment]
    if pending[1].set_running_or_notify_cancel():
        batch.append(pending)
        return True
    return False


def _rows(pending: _Pending) -> int:
    item = pending[0]
    return 1 if isinstance(item, NewDelivery) else len(item)


def _wait(future: Future[T], timeout: float | None, late: Late | None = None) -> T:
    """The future's result within `timeout` seconds, or `AckDeadlinePassed`: the delivery is
    dropped if no writer has taken it yet, and written anyway (its retry is then a duplicate)
    if one has, and `late` hears how it went."""
    try:
        return future.result(timeout)
    except FutureTimeout:
        if future.cancel():
            raise AckDeadlinePassed(timeout or 0.0) from None
        if not future.done():
            if late is not None:
                future.add_done_callback(lambda done: _tell(late, _outcome(done)))
            raise AckDeadlinePassed(timeout or 0.0) from None
        return future.result()  # it finished just now


def _outcome(future: Future[Any]) -> object:
    error = future.exception()
    return error if error is not None else future.result()
