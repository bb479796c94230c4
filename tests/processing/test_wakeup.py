"""Wake-ups: an idle worker starts on a new event at once, not at its next poll.

Each test gives the worker a 30 s poll interval and a 10 s deadline, so only the wake-up
mechanism under test can explain the event being processed in time. Latency itself is
measured in the benchmarks, not asserted here.
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
from hookinbox._processing._wakeup import WakeSender, WakeSocket
from hookinbox._settings import Overrides, overriding
from tests.apps import orders as orders_app
from tests.processing.conftest import checkout
from tests.support.signing import stripe_delivery

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
    worker = inbox.worker(options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(0.3)  # let it reach its idle wait
    try:
        yield
    finally:
        worker.stop()
        thread.join(timeout=10)
        assert not thread.is_alive()


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
    notification channel, so there the worker relies on its default 50 ms poll.
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
    db_url: str, socket_path: str, group_commit: bool
) -> None:
    """`hookinbox serve`'s wiring, in one process: the receiving inbox has the worker's socket
    in its settings (as serve's HTTP processes do) and sends a datagram after each commit; the
    worker, polling every 30 s, is woken by it (on PostgreSQL NOTIFY would wake it too)."""
    orders_app.create_tables(db_url)
    overrides = Overrides(wake_socket=socket_path, group_commit=None if group_commit else False)
    with overriding(overrides):
        receiving = orders_app.build(db_url)
    assert receiving.settings.wake_socket == socket_path
    working = orders_app.build(db_url)
    with running_worker(working, LONG_POLL, wake_socket=socket_path):
        assert Path(socket_path).is_socket()
        for number in range(3):
            deliver(receiving, number)
            wait_processed(working, f"evt_{number}")
    assert not Path(socket_path).exists()  # a clean stop removes it
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
        receiver.join(timeout=5.0)
        receiver.close()
    assert not receiver.is_alive()
    assert not Path(socket_path).exists()
    sender()  # nobody bound, no file: ignored too
    sender.close()


def test_an_unbindable_socket_leaves_the_worker_polling(tmp_path: Path) -> None:
    wake, stop = threading.Event(), threading.Event()
    missing = str(tmp_path / "no-such-directory" / "worker.sock")
    assert not WakeSocket(missing, [wake], stop).bind()
