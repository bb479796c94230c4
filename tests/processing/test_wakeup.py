"""Wake-ups: an idle worker starts on a new event at once, not at its next poll.

Each test of a running worker gives it a 30 s poll interval and a 10 s deadline, so only the
wake-up mechanism under test can explain the event being processed in time. Latency itself is
measured in the benchmarks, not asserted here. `hookinbox serve`'s own wiring, with real
processes and a SIGKILL, is tested in tests/processes/test_serve_wakeup.py.
"""

from __future__ import annotations

import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hookinbox import Inbox, Status, WorkerOptions
from hookinbox._processing._queues import EventQueue
from hookinbox._processing._wakeup import WakeSender, WakeSocket
from hookinbox._settings import Overrides, overriding
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout, subscription_update
from tests.support.clock import ManualClock
from tests.support.in_process import build_worker, worker_in_thread
from tests.support.signing import stripe_delivery
from tests.support.workers import wait_for

LONG_POLL = 30.0


@pytest.fixture
def socket_path() -> Iterator[str]:
    """A short path (pytest's tmp_path can pass the 108 bytes a socket's path may take)."""
    with tempfile.TemporaryDirectory(prefix="hookinbox-test-") as directory:
        yield str(Path(directory) / "worker.sock")


@contextmanager
def running_worker(
    inbox: Inbox, poll_interval: float, wake_socket: str | None = None
) -> Iterator[None]:
    options = WorkerOptions(
        concurrency=2, poll_interval=poll_interval, handle_signals=False, wake_socket=wake_socket
    )
    with worker_in_thread(inbox, options, settle=0.3):  # 0.3 s: to reach its idle wait
        yield


def wait_processed(inbox: Inbox, event_id: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        event = inbox.store.get_event("stripe", event_id)
        if event is not None and event.status is Status.PROCESSED:
            return
        time.sleep(0.02)
    raise AssertionError(f"{event_id} was not processed within {timeout} s")


def deliver(inbox: Inbox, number: int) -> None:
    headers, body = stripe_delivery(checkout(number), orders_app.STRIPE_SECRET)
    assert inbox.receive("stripe", headers, body).body["status"] == "accepted"


def test_ingest_in_the_same_process_wakes_the_worker(db_url: str) -> None:
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    with running_worker(inbox, LONG_POLL):
        for number in range(3):
            deliver(inbox, number)
            wait_processed(inbox, f"evt_{number}")
    inbox.close()


def test_ingest_in_another_process_wakes_the_worker(db_url: str, backend: str) -> None:
    """Two Inbox objects share nothing but the database, as two processes would.

    PostgreSQL wakes the worker with LISTEN/NOTIFY even with a 30 s poll; SQLite has no
    notification channel, so there a worker on its own relies on its default 50 ms poll (one
    that serve wakes: the next test).
    """
    orders_app.create_tables(db_url)
    receiving, working = orders_app.build(db_url), orders_app.build(db_url)
    poll = LONG_POLL if backend == "postgres" else 0.05
    with running_worker(working, poll):
        for number in range(3):
            deliver(receiving, number)
            wait_processed(working, f"evt_{number}")
    receiving.close()
    working.close()


@pytest.mark.parametrize("group_commit", [True, False], ids=["group-commit", "own-commit"])
def test_a_commit_in_another_process_wakes_the_worker_through_its_socket(
    db_url: str, backend: str, socket_path: str, group_commit: bool
) -> None:
    """`hookinbox serve`'s wiring, in one process: the receiving inbox has the worker's socket
    in its settings (as serve's HTTP processes do) and sends a datagram after each commit; the
    worker, polling every 30 s, is woken by it. On PostgreSQL neither binds nor sends: NOTIFY
    wakes the worker, from any host."""
    orders_app.create_tables(db_url)
    overrides = Overrides(wake_socket=socket_path, group_commit=None if group_commit else False)
    with overriding(overrides):
        receiving = orders_app.build(db_url)
    assert receiving.settings.wake_socket == socket_path
    working = orders_app.build(db_url)
    try:
        with running_worker(working, LONG_POLL, wake_socket=socket_path):
            deadline = time.monotonic() + 10  # a loaded machine may take more than 0.3 s
            while backend != "postgres" and not Path(socket_path).is_socket():
                assert time.monotonic() < deadline, "the worker never bound its socket"
                time.sleep(0.05)
            assert Path(socket_path).is_socket() is (backend != "postgres")  # no LISTEN: a datagram
            for number in range(3):
                deliver(receiving, number)
                wait_processed(working, f"evt_{number}")
        assert not Path(socket_path).exists()  # a clean stop removes it
    finally:
        receiving.close()
        working.close()


def test_the_socket_replaces_a_killed_workers_file_and_wakes_on_each_datagram(
    socket_path: str,
) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stale.bind(socket_path)
    stale.close()  # as SIGKILL leaves it: the file stays, nobody reads it
    sender = WakeSender(socket_path)
    sender()  # refused (nobody bound): ignored

    wake, stop = threading.Event(), threading.Event()
    receiver = WakeSocket(socket_path, [wake], stop)
    assert receiver.bind()
    receiver.start()
    try:
        for _ in range(3):
            sender()
            assert wake.wait(5.0)
            wake.clear()
        for _ in range(100):  # more than the socket queues: the extra ones are dropped, quietly
            sender()
        assert wake.wait(5.0)
    finally:
        stop.set()
        receiver.close()
    assert not receiver.is_alive()
    assert not Path(socket_path).exists()
    sender()  # nobody bound, no file: ignored too
    sender.close()


def test_an_unbindable_socket_leaves_the_worker_polling(tmp_path: Path) -> None:
    wake, stop = threading.Event(), threading.Event()
    missing = str(tmp_path / "no-such-directory" / "worker.sock")
    assert not WakeSocket(missing, [wake], stop).bind()


def test_a_long_poll_still_wakes_for_the_soonest_retry(db_url: str) -> None:
    """serve's worker polls every second (the server wakes it), so a retry coming due sooner
    than its next poll is looked ahead for; a 50 ms poll on SQLite finds it by itself."""
    clock = ManualClock()
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url, clock=clock)
    headers, body = stripe_delivery(
        subscription_update(1, payment="pi_none"), orders_app.STRIPE_SECRET, timestamp=int(clock())
    )
    inbox.receive("stripe", headers, body)
    inbox.process_due()  # NotReady: tried again in about a second
    event = inbox.store.get_event("stripe", "evt_1")
    assert event is not None and event.next_attempt_at is not None
    due_in = event.next_attempt_at.timestamp() - clock()
    assert 0.5 < due_in < 1.5
    queue = EventQueue(inbox._runtime.processor, lease_seconds=60)
    assert queue.idle_wait(30.0) == pytest.approx(due_in, abs=0.01)
    clock.advance(due_in - 0.25)
    assert queue.idle_wait(1.0) == pytest.approx(0.25, abs=0.01)
    if inbox.store.dialect.name == "sqlite":
        assert queue.idle_wait(0.05) == 0.05
    inbox.close()


def test_a_worker_that_serve_wakes_polls_every_second(
    db_url: str, backend: str, socket_path: str
) -> None:
    """Woken on each new event, serve's worker polls only as a fallback, as on PostgreSQL (a
    worker on its own on SQLite checks every 50 ms); a poll set by hand is kept."""
    orders_app.create_tables(db_url)
    inbox = orders_app.build(db_url)
    alone = build_worker(inbox, WorkerOptions(handle_signals=False))
    polls_alone = 0.05 if backend in ("sqlite", "mysql") else 1.0  # no LISTEN: a due read
    assert {loop.poll for loop in alone.loops} == {polls_alone}
    for poll, expected in ((None, 1.0), (0.2, 0.2)):
        options = WorkerOptions(handle_signals=False, wake_socket=socket_path, poll_interval=poll)
        with worker_in_thread(inbox, options) as woken:
            # The poll is set once the socket is bound, after the schema check: under load
            # that takes longer than any fixed pause.
            wait_for(
                lambda want=expected: {loop.poll for loop in woken.loops} == {want},
                timeout=15,
                what=f"the woken worker to poll every {expected} s",
            )
    inbox.close()
