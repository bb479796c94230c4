"""Real `hookinbox worker` processes for tests: start, kill, restart, and read what they did.

Workers run `python -m hookinbox worker tests.apps.orders:inbox` from the project root, with
their output in temporary files, never pipes: a chatty worker must not block on a full pipe.
Ingest goes through `Inbox.receive` (framework-neutral, no HTTP), and can run in spawned
processes to deliver concurrently.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox._storage import Store
from hookinbox._storage._rows import EVENT_JOIN, EVENT_STATUS, select_events
from hookinbox._storage._schema import events
from tests.apps import orders
from tests.support.server import ROOT, hookinbox_command
from tests.support.signing import stripe_delivery

APP = "tests.apps.orders:inbox"
ACTIVE = ("pending", "processing", "deferred")
"""Statuses of an event that is not finished yet."""


# -- events and ingest ---------------------------------------------------------------------


def checkout_event(number: int) -> dict[str, Any]:
    return {
        "id": f"evt_{number}",
        "type": "checkout.session.completed",
        "created": int(time.time()),
        "data": {"object": {"id": f"cs_{number}", "payment_intent": f"pi_{number}"}},
    }


def poison_event(event_id: str) -> dict[str, Any]:
    """An event whose handler kills the worker process (os._exit(17)) every time."""
    return {
        "id": event_id,
        "type": "test.poison",
        "created": int(time.time()),
        "data": {"object": {"id": f"obj_{event_id}"}},
    }


def deliver(inbox: Inbox, event: dict[str, Any], *, attempts: int = 100) -> tuple[str, int]:
    """Deliver like a provider: retry a 503 (database busy) until it is answered 2xx.

    Returns the reply's status ("accepted" or "duplicate") and how many 503s came first.
    A 503 stores nothing (the inboxes below have no ack deadline, whose 503 may come after a
    write that still commits), so the retries do not inflate the event's delivery_count.
    """
    headers, body = stripe_delivery(event, orders.STRIPE_SECRET)
    for busy in range(attempts):
        reply = inbox.receive("stripe", headers, body)
        if reply.ok:
            return str(reply.body["status"]), busy
        if reply.status_code != 503:
            raise AssertionError(f"delivery of {event['id']} answered {reply}")
        time.sleep(0.02)
    raise AssertionError(f"delivery of {event['id']} still answered 503 after {attempts} tries")


def deliver_checkouts(database_url: str, numbers: list[int], seed: int) -> dict[str, int]:
    """Deliver one copy of each checkout in a shuffled order (runs in a spawned process)."""
    order = list(numbers)
    random.Random(seed).shuffle(order)
    # No ack deadline: these counts are exact (one `accepted` per event, delivery_count equal
    # to the copies sent), and a busy machine must not turn a slow commit into a 503 whose
    # retry is a duplicate. The deadline has tests of its own (tests/reliability).
    inbox = orders.build(database_url, ack_deadline=None)
    counts: Counter[str] = Counter()
    try:
        for number in order:
            status, busy = deliver(inbox, checkout_event(number))
            counts[status] += 1
            counts["busy_503"] += busy
    finally:
        inbox.close()
    return dict(counts)


def ingest_checkouts(database_url: str, numbers: Iterable[int]) -> None:
    """Deliver each checkout once, from this process."""
    inbox = orders.build(database_url, ack_deadline=None)  # exact counts: see deliver_checkouts
    try:
        for number in numbers:
            status, _busy = deliver(inbox, checkout_event(number))
            assert status == "accepted", f"evt_{number}: {status}"
    finally:
        inbox.close()


# -- reading results -----------------------------------------------------------------------


@contextmanager
def opened_store(database_url: str, *, migrate: bool = True) -> Iterator[Store]:
    """`migrate=False` to read while a worker holds SQLite's write lock."""
    store = Store(database_url, auto_migrate=migrate)
    try:
        yield store
    finally:
        store.dispose()


def status_counts(store: Store) -> dict[str, int]:
    """Events by status as operators see them (`processing` while a worker holds one)."""
    query = sa.select(EVENT_STATUS, sa.func.count()).select_from(EVENT_JOIN).group_by(EVENT_STATUS)
    with store.reading() as connection:  # read-only: no SQLite write lock while polling
        return {str(status): int(count) for status, count in connection.execute(query)}


def event_row(store: Store, event_id: str) -> sa.RowMapping:
    # As operators read it: `processing` (and the live attempts) while a worker holds it.
    query = select_events().where(events.c.source == "stripe", events.c.event_id == event_id)
    with store.reading() as connection:
        row = connection.execute(query).mappings().first()
    assert row is not None, f"{event_id} is not stored"
    return row


def read_all(store: Store, query: sa.Select[Any]) -> list[sa.Row[Any]]:
    with store.reading() as connection:
        return list(connection.execute(query))


def wait_for(
    condition: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    describe: Callable[[], str] = lambda: "",
    check: Callable[[], None] = lambda: None,
    interval: float = 0.1,
) -> float:
    """Poll `condition` until true; returns the seconds it took.

    `check` runs on every turn (e.g. "no worker died"), `describe` explains a timeout.
    """
    started = time.monotonic()
    deadline = started + timeout
    while True:
        check()
        if condition():
            return time.monotonic() - started
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}. {describe()}"
            )
        time.sleep(interval)


# -- worker processes ----------------------------------------------------------------------


class WorkerProcess:
    """One `hookinbox worker` subprocess; its output (stdout and stderr) goes to a temp file."""

    def __init__(
        self,
        database_url: str,
        *args: str,
        env: dict[str, str] | None = None,
        command: str = "worker",
        app: str = APP,
        argv: list[str] | None = None,
    ) -> None:
        """`argv` replaces the `hookinbox` command line (Django's `hookinbox_worker`)."""
        self.log = tempfile.TemporaryFile("w+b")
        self.process = subprocess.Popen(
            argv or hookinbox_command(command, app, "--database-url", database_url, *args),
            cwd=ROOT,
            env={**os.environ, "HOOKINBOX_LOG_LEVEL": "warning", **(env or {})},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.started = time.monotonic()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def running(self) -> bool:
        return self.process.poll() is None

    def signal(self, signum: int) -> None:
        if self.running():
            self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def handles_sigterm(self) -> bool:
        """True once the worker loop has installed its SIGTERM handler (Linux: /proc).

        Before that (while Python imports the app) SIGTERM kills a worker with -15, as it
        would any program; a test that means "shut down gracefully" waits for this first.
        """
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except FileNotFoundError:
            return False
        caught = next(line for line in status.splitlines() if line.startswith("SigCgt:"))
        return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)

    def wait_ready(self, timeout: float = 30) -> None:
        """Wait until SIGTERM means a graceful stop (fails at once if the worker exits)."""

        def check() -> None:
            if not self.running():
                raise AssertionError(f"the worker exited while starting: {self.describe()}")

        wait_for(
            self.handles_sigterm,
            timeout=timeout,
            what=f"worker {self.pid} to install its SIGTERM handler",
            describe=self.describe,
            check=check,
            interval=0.05,
        )

    def kill(self) -> int:
        """SIGKILL: no handler, no cleanup, exactly like the OOM killer."""
        self.signal(signal.SIGKILL)
        return self.process.wait(timeout=10)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def describe(self) -> str:
        tail = self.output()[-3000:]
        return f"worker pid {self.pid} (exit code {self.returncode}); its output:\n{tail}"

    def close(self) -> None:
        """Kill it if still running, reap it, and close its log."""
        if self.running():
            self.process.kill()
        self.process.wait(timeout=10)
        self.log.close()


class Workers:
    """Several worker processes started with the same arguments; every one is reaped on exit."""

    def __init__(
        self,
        database_url: str,
        *args: str,
        env: dict[str, str] | None = None,
        command: str = "worker",
        app: str = APP,
    ) -> None:
        self.database_url = database_url
        self.args = args
        self.env = env
        self.command = command
        self.app = app
        self.live: list[WorkerProcess] = []
        self.retired: list[WorkerProcess] = []

    def start(self, count: int = 1) -> list[WorkerProcess]:
        started = [
            WorkerProcess(
                self.database_url, *self.args, env=self.env, command=self.command, app=self.app
            )
            for _ in range(count)
        ]
        self.live.extend(started)
        return started

    def retire(self, worker: WorkerProcess) -> None:
        """Forget a worker that has exited (its log stays readable until close)."""
        assert not worker.running(), f"worker {worker.pid} is still running"
        self.live.remove(worker)
        self.retired.append(worker)

    def check_alive(self) -> None:
        """Fail at once, with its output, if a live worker exited on its own."""
        for worker in self.live:
            if not worker.running():
                raise AssertionError(f"a worker exited unexpectedly: {worker.describe()}")

    def terminate_all(self, timeout: float) -> dict[int, int]:
        """Once each is ready, SIGTERM every live worker; returns {pid: exit code}."""
        for worker in self.live:
            worker.wait_ready()
        for worker in self.live:
            worker.signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        codes: dict[int, int] = {}
        for worker in list(self.live):
            try:
                codes[worker.pid] = worker.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"worker did not exit within {timeout} s of SIGTERM: {worker.describe()}"
                ) from None
            self.retire(worker)
        return codes

    def describe(self) -> str:
        return "\n".join(w.describe() for w in [*self.live, *self.retired] if w.output().strip())

    def close(self) -> None:
        for worker in [*self.live, *self.retired]:
            worker.close()
        self.live.clear()
        self.retired.clear()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
