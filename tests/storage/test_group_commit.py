"""Group commit: concurrent deliveries share transactions, and a failed batch answers all of its
deliveries with the error while leaving nothing behind."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from hookinbox._errors import AckDeadlinePassed, ConfigurationError, StoreUnavailable
from hookinbox._model import RecordedDelivery
from hookinbox._storage import GroupCommit, GroupCommitter, Store
from hookinbox._storage._schema import events
from tests.storage.test_batch import delivery
from tests.support.locks import lock_held


def batch_size(statement: str, parameters: Any) -> int | None:
    """For group commit's statements, how many deliveries the batch holds; else None.

    PostgreSQL: the one statement (one array element per delivery in its log part). SQLite:
    the upsert, which holds one row per event (deliveries of one event are folded).
    """
    if statement.lstrip().startswith("WITH batch AS"):
        return len(json.loads(parameters["events"])[1])  # [events, delivery-log rows]
    if statement.startswith("INSERT INTO hookinbox_events") and (
        "?, 0, 0, ?" in statement or "%s, 0, 0, %s" in statement  # SQLite, MariaDB
    ):
        return len(parameters) // 11  # 11 bound values per row (the payload travels apart)
    return None  # anything else, including the one-row upsert used without group commit


def logged_deliveries(statement: str, parameters: Any) -> int | None:
    """How many deliveries a group-commit batch logged (its size), else None."""
    if statement.lstrip().startswith("WITH batch AS"):
        return len(json.loads(parameters["events"])[1])  # [events, delivery-log rows]
    if statement.startswith("INSERT INTO hookinbox_deliveries (received_at,"):
        # SQLite: one row per delivery (a batch of one is executed as a single row)
        return len(parameters) if isinstance(parameters, list) else 1
    return None


@contextmanager
def watched(store: Store) -> Iterator[dict[str, list[int]]]:
    """Record the size of each batch the store executes, and count commits."""
    seen: dict[str, list[int]] = {"batches": [], "commits": []}

    def after_execute(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        size = logged_deliveries(statement, parameters)
        if size is not None:
            seen["batches"].append(size)

    def on_commit(_conn: Any) -> None:
        seen["commits"].append(1)

    event.listen(store.engine, "after_cursor_execute", after_execute)
    event.listen(store.engine, "commit", on_commit)
    try:
        yield seen
    finally:
        event.remove(store.engine, "after_cursor_execute", after_execute)
        event.remove(store.engine, "commit", on_commit)


def test_concurrent_deliveries_share_transactions(store: Store) -> None:
    store.ensure_schema()
    committer = GroupCommitter(store)
    keys = [f"evt_{n % 60}" for n in range(240)]  # each event delivered 4 times
    with watched(store) as seen, ThreadPoolExecutor(max_workers=48) as pool:
        results = list(
            pool.map(
                lambda n: committer.record(delivery("s", keys[n], b"same", n)), range(len(keys))
            )
        )
    committer.close()
    assert sum(r.is_new for r in results) == 60
    for key in set(keys):
        mine = [r for k, r in zip(keys, results, strict=True) if k == key]
        assert sorted(r.delivery_count for r in mine) == [1, 2, 3, 4]
        assert len({r.row_id for r in mine}) == 1
    assert sum(seen["batches"]) == len(keys)
    # Each batch is one transaction (PostgreSQL: one autocommitted statement).
    assert len(seen["batches"]) < len(keys), "no two deliveries ever shared a transaction"
    with store.engine.connect() as connection:
        stored = connection.execute(sa.select(sa.func.sum(events.c.delivery_count))).scalar()
        rows = connection.execute(sa.select(sa.func.count()).select_from(events)).scalar()
    assert (rows, stored) == (60, 240)


def kill_connection(store: Store, connection: Any) -> None:
    """Really break the batch's connection: PostgreSQL terminates its backend from another
    session (MariaDB kills its thread); SQLite interrupts the connection, failing its next
    statement."""
    dbapi = connection.connection.dbapi_connection
    if store.dialect.name == "mysql":
        with sa.create_engine(store.engine.url, poolclass=sa.NullPool).connect() as admin:
            admin.exec_driver_sql(f"KILL CONNECTION {int(dbapi.thread_id())}")
    elif store.dialect.name == "postgresql":
        pid = dbapi.info.backend_pid
        with sa.create_engine(store.engine.url, poolclass=sa.NullPool).connect() as admin:
            admin.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    else:
        dbapi.interrupt()


@contextmanager
def broken_batch(store: Store, when: Callable[[int], bool]) -> Iterator[list[int]]:
    """Kill the connection of the first batch whose size satisfies `when`, while that batch is
    in flight: on PostgreSQL just before its one statement runs (the statement then fails),
    on SQLite and MariaDB between its upsert and its log insert (the transaction then fails).
    Yields the sizes of the batches it broke."""
    broken: list[int] = []
    lock = threading.Lock()
    on_postgres = store.dialect.name == "postgresql"
    moment = "before_cursor_execute" if on_postgres else "after_cursor_execute"

    def listener(conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        size = batch_size(statement, parameters)
        with lock:
            if size is not None and not broken and when(size):
                broken.append(size)
                kill_connection(store, conn)

    event.listen(store.engine, moment, listener)
    try:
        yield broken
    finally:
        event.remove(store.engine, moment, listener)


def test_a_batch_whose_connection_dies_fails_every_delivery_in_it(store: Store) -> None:
    store.ensure_schema()
    committer = GroupCommitter(store)
    armed = threading.Event()

    def slow_first_batch(*_: Any) -> None:
        if not armed.is_set():  # the first batch is slow: the others queue up behind it
            armed.set()
            time.sleep(0.3)

    event.listen(store.engine, "before_cursor_execute", slow_first_batch)
    try:
        with broken_batch(store, lambda size: size > 1) as failed_sizes:
            items = [delivery("s", f"evt_{n}", b"x", n) for n in range(20)]
            futures = [committer.submit(items[0])]
            armed.wait(5)
            futures += [committer.submit(item) for item in items[1:]]
            outcomes = [_outcome(f) for f in futures]
    finally:
        event.remove(store.engine, "before_cursor_execute", slow_first_batch)
    failed = [n for n, o in enumerate(outcomes) if isinstance(o, StoreUnavailable)]
    assert failed_sizes and len(failed) == failed_sizes[0], outcomes
    assert all(isinstance(outcomes[n], RecordedDelivery) for n in set(range(20)) - set(failed))
    with store.engine.connect() as connection:
        stored = set(connection.execute(sa.select(events.c.event_id)).scalars())
    assert stored == {f"evt_{n}" for n in range(20)} - {f"evt_{n}" for n in failed}
    # The provider retries what got 503: each is accepted now, exactly once.
    retried = [committer.record(items[n]) for n in failed]
    assert all(r.is_new and r.delivery_count == 1 for r in retried)
    committer.close()


def _outcome(future: Future[RecordedDelivery]) -> RecordedDelivery | BaseException:
    try:
        return future.result(timeout=30)
    except Exception as error:
        return error


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_row_the_database_refuses_does_not_fail_its_neighbours(store: Store) -> None:
    """PostgreSQL refuses a NUL character in text: that delivery fails alone, the rest of its
    batch is stored one by one."""
    store.ensure_schema()
    committer = GroupCommitter(store)
    gate = threading.Event()
    # Hold the writer in the first batch so that the next one gathers all of the others.
    event.listen(store.engine, "before_cursor_execute", lambda *_: gate.wait(5))
    first = committer.submit(delivery("s", "evt_first", b"x", 0))
    time.sleep(0.1)
    futures = [committer.submit(delivery("s", f"evt_{n}", b"x", n)) for n in range(5)]
    bad = committer.submit(delivery("s", "evt_bad\x00", b"x", 9))
    gate.set()
    assert first.result(30).is_new
    assert all(f.result(30).is_new for f in futures)
    with pytest.raises(sa.exc.DataError):
        bad.result(30)
    committer.close()


def test_close_stores_what_is_queued_then_refuses(store: Store) -> None:
    store.ensure_schema()
    committer = GroupCommitter(store)
    futures = [committer.submit(delivery("s", f"evt_{n}", b"x", n)) for n in range(50)]
    committer.close()
    assert all(f.result(0).is_new for f in futures)
    with pytest.raises(StoreUnavailable):
        committer.record(delivery("s", "evt_late", b"x", 99))


def test_options_are_bounded() -> None:
    with pytest.raises(ConfigurationError):
        GroupCommit(max_rows=0)
    with pytest.raises(ConfigurationError):
        GroupCommit(max_wait=1.0)


def test_a_delivery_given_up_before_a_writer_takes_it_is_never_written(store: Store) -> None:
    store.ensure_schema()
    committer = GroupCommitter(store)
    url = store.engine.url.render_as_string(hide_password=False)
    with lock_held(url.replace("+psycopg", "").replace("+pymysql", "")):
        # Each writer takes one delivery and waits for the lock; the next one stays queued.
        taken: list[Future[RecordedDelivery]] = []
        for n in range(committer.writers):
            taken.append(committer.submit(delivery("s", f"evt_taken_{n}", b"x", n)))
            wait_until(taken[-1].running)
        started = time.monotonic()
        with pytest.raises(AckDeadlinePassed, match="ack deadline"):
            committer.record(delivery("s", "evt_given_up", b"x", 9), timeout=0.3)
        assert time.monotonic() - started < 2.0
    results = [future.result(timeout=30) for future in taken]
    committer.close()
    assert all(result.is_new for result in results)
    with store.reading() as connection:
        stored = set(connection.execute(sa.select(events.c.event_id)).scalars())
    assert "evt_given_up" not in stored
    assert {f"evt_taken_{n}" for n in range(len(taken))} <= stored


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_on_new_event_is_called_once_per_commit_that_stored_a_new_event(store: Store) -> None:
    """The hook `hookinbox serve` wakes its worker with: once per commit, not per delivery,
    and not for a commit with nothing to process (duplicates, events held as stale)."""
    store.ensure_schema()
    calls: list[int] = []
    committer = GroupCommitter(store, on_new_event=lambda: calls.append(1))
    assert committer.record(delivery("s", "evt_new", b"a", 1)).is_new
    assert len(calls) == 1
    assert not committer.record(delivery("s", "evt_new", b"a", 2)).is_new  # a duplicate
    assert committer.record(delivery("s", "evt_old", b"b", 3, stale=True)).is_new  # stale
    assert len(calls) == 1
    with watched(store) as seen, ThreadPoolExecutor(max_workers=16) as pool:
        results = list(
            pool.map(lambda n: committer.record(delivery("s", f"evt_{n}", b"c", n)), range(64))
        )
    committer.close()
    assert all(result.is_new for result in results)
    assert len(calls) - 1 == len(seen["batches"])  # one per batch, each batch one commit


def test_an_event_loop_is_woken_once_per_batch_not_per_delivery(store: Store) -> None:
    """`submit_async`: every delivery's asyncio future is resolved on its loop, and each batch
    wakes the loop once (one `call_soon_threadsafe`), however many deliveries it holds."""
    store.ensure_schema()
    committer = GroupCommitter(store)
    wake_ups: list[int] = []

    async def deliver_all() -> list[RecordedDelivery]:
        loop = asyncio.get_running_loop()
        original = loop.call_soon_threadsafe

        def counted(callback: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(callback, "__name__", "") == "_resolve":
                wake_ups.append(len(args[0]))
            return original(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        futures = [committer.submit_async(delivery("s", f"evt_{n % 40}", b"x", n))
                   for n in range(120)]  # fmt: skip
        return list(await asyncio.gather(*futures))

    with watched(store) as seen:
        results = asyncio.run(deliver_all())
    committer.close()
    assert sum(r.is_new for r in results) == 40
    assert sorted(r.delivery_count for r in results) == sorted([1, 2, 3] * 40)
    assert sum(wake_ups) == 120  # every delivery answered through a wake-up
    assert len(wake_ups) == len(seen["batches"]) < 120  # one per batch


def test_an_awaited_delivery_given_up_before_a_writer_takes_it_is_never_written(
    store: Store,
) -> None:
    """The ack deadline on the event loop: the awaited future is cancelled, and the committer
    drops the delivery if no writer has taken it yet."""
    store.ensure_schema()
    committer = GroupCommitter(store)
    url = store.engine.url.render_as_string(hide_password=False)

    async def give_up() -> None:
        future = committer.submit_async(delivery("s", "evt_given_up", b"x", 9))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                await future
        assert future.cancelled()

    with lock_held(url.replace("+psycopg", "").replace("+pymysql", "")):
        taken = []
        for n in range(committer.writers):  # each writer takes one and waits for the lock
            taken.append(committer.submit(delivery("s", f"evt_taken_{n}", b"x", n)))
            wait_until(taken[-1].running)
        asyncio.run(give_up())
    assert all(future.result(timeout=30).is_new for future in taken)
    committer.close()
    with store.reading() as connection:
        stored = set(connection.execute(sa.select(events.c.event_id)).scalars())
    assert "evt_given_up" not in stored
    assert {f"evt_taken_{n}" for n in range(len(taken))} <= stored


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_batch_behind_a_held_row_keeps_to_the_statement_timeout_off_the_writer(
    store: Store,
) -> None:
    """Issue 31, item 1 (PostgreSQL): a batched delivery whose row another transaction holds
    (a slow handler's claim) is cancelled at the writers' statement timeout, and single
    deliveries submitted meanwhile are stored at once: the batch is not on the shared writer.
    A waiter that gave up hears how its write ended (`late`)."""
    committer = GroupCommitter(store, statement_timeout=1.0)
    first = delivery("hubspot", "7:1", b'{"n": 1}', 0)
    committer.record_batch((first,))
    heard: list[object] = []
    try:
        with store.engine.connect() as holder, holder.begin():
            holder.execute(
                sa.select(events.c.id).where(events.c.event_id == "7:1").with_for_update()
            )
            started = time.monotonic()
            again = committer.submit_batch((first, delivery("hubspot", "7:2", b"{}", 1)))
            time.sleep(0.1)  # the batch waits for the row now
            single = committer.record(delivery("stripe", "evt_meanwhile", b"{}", 2), timeout=5)
            single_took = time.monotonic() - started
            with pytest.raises(AckDeadlinePassed):
                committer.record_batch((first,), timeout=0.2, late=heard.append)
            with pytest.raises(StoreUnavailable, match="statement timeout"):
                again.result(timeout=10)
            batch_took = time.monotonic() - started
        wait_until(lambda: bool(heard))
    finally:
        committer.close()
    assert single.is_new and single_took < 0.8, single_took
    assert 0.9 < batch_took < 3.0, batch_took
    [outcome] = heard  # the write it gave up on ended after all: cancelled, or stored late
    assert isinstance(outcome, StoreUnavailable | list), outcome
