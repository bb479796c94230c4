"""SQLite on a disk that fills up, a file that may not grow, and a file that turns read-only.

What it proves, for a real `hookinbox serve` of `tests.apps.orders` (one server process and its
worker) while its SQLite database cannot be written, and then can again without a restart:

- every signed delivery is answered 2xx (stored) or 503 with Retry-After: never a 500, never a
  2xx for an event that was not stored; the server log names the cause in one line;
- neither the server nor its worker dies (same worker pid throughout; no supervisor restart;
  exit 0 on SIGTERM);
- nothing partial is left: the events refused with 503 are not in the database, and when the
  provider retries them after the fault each is answered "accepted", not "duplicate";
- afterwards new deliveries are accepted, every event answered 2xx is stored once and its
  handler applied once (`applied_checkouts` has no unique constraint, so a second application
  would show), and the database passes `PRAGMA integrity_check`.

How each fault is made (we run as root in a VM; the choices below were probed here):

- disk full: a 4 MiB tmpfs is mounted for the database, filled to the last byte with a filler
  file while the server runs, and freed by deleting the filler. SQLite answers SQLITE_FULL
  ("database or disk is full").
- file size limit: RLIMIT_FSIZE, lowered (soft limit) to 4 KiB on every process of the server
  tree with prlimit(2) while it runs and raised again afterwards. Python ignores SIGXFSZ from
  start-up, so a write past the limit fails with EFBIG and SQLite answers SQLITE_IOERR_WRITE.
  This is also the fallback for the disk-full case where mounting is not permitted (the case
  is then marked so); if neither works, the test fails.
- read-only file: `chattr +i` on the database file and its WAL, then `chattr -i`. For root,
  permission bits stop nothing; a read-only (bind) remount is refused while the server holds
  the files open for writing (EBUSY); permission bits for an unprivileged server user are
  checked only when a file is opened, and hookinbox's pooled connections keep theirs open.
  The immutable flag is checked on every write, like a filesystem that the kernel remounted
  read-only after errors (ext4 enforces it on open descriptors; tmpfs does not, so a probe
  finds a filesystem that does or fails). SQLite answers SQLITE_IOERR_WRITE on the open
  connections, SQLITE_READONLY on any opened meanwhile. The -shm file (a rebuildable index,
  memory-mapped) stays writable.

/readyz probes with a write (the schema version row rewritten): it must answer 503 during each
fault, as the deliveries do, and 200 again after.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sqlite3
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
import pytest
import sqlalchemy as sa

from hookinbox import StoreUnavailable
from hookinbox._storage import Store
from tests.apps import orders
from tests.reliability._report import Trial, record
from tests.support.server import ROOT, free_port, hookinbox_command
from tests.support.signing import stripe_delivery
from tests.support.workers import checkout_event, wait_for

pytestmark = pytest.mark.slow  # subprocesses: not in `make test-fast`

APP = "tests.apps.orders:inbox"
BEFORE = 8
"""Events accepted before the fault (the worker is still processing some when it begins)."""
REFUSED_IN_A_ROW = 5
"""Consecutive refusals that show the fault has taken hold."""
MAX_DURING_FAULT = 300
"""A bound on deliveries sent while waiting for the fault to take hold."""
AFTER = 5
"""Brand-new events delivered after the fault."""
TMPFS_SIZE = "4m"
FILE_SIZE_LIMIT = 4096
REFUSAL_CAUSE_LINE = "unavailable 503"
HOLD = 1.5
"""Seconds the fault is held once it has taken hold: the worker meets it too."""


# -- the server ----------------------------------------------------------------------------


class Server:
    """`hookinbox serve` of the orders app with its worker; its output read from a pipe.

    A pipe, not a file: under a file size limit the server could not write a log file either.
    A thread drains the pipe, so the server never blocks on it.
    """

    def __init__(self, database_url: str) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        command = hookinbox_command(
            "serve", APP, "--database-url", database_url, "--port", str(self.port),
            "--workers", "1", "--log-level", "warning", "--lease-seconds", "2",
        )  # fmt: skip
        # Handlers take a little time, so attempts are in flight when the fault begins;
        # a failed attempt is retried soon.
        env = {**os.environ, "ORDERS_HANDLER_SLEEP": "0.1", "ORDERS_FIRST_DELAY": "0.5"}
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self._lines.append(raw.decode(errors="replace").rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self._lines)

    def wait_ready(self, timeout: float = 30) -> None:
        def ready() -> bool:
            try:
                return httpx.get(self.base_url + "/readyz", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        def alive() -> None:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited while starting:\n{self.output()}")

        wait_for(ready, timeout=timeout, what="the server to be ready", check=alive)
        wait_for(
            lambda: self.worker_pid() is not None,
            timeout=timeout,
            what="serve to start its worker",
            check=alive,
        )

    def pids(self) -> list[int]:
        """The serve process and all its descendants (its worker)."""
        found: list[int] = []
        pending = [self.process.pid]
        while pending:
            pid = pending.pop()
            found.append(pid)
            for task in Path(f"/proc/{pid}/task").glob("*"):
                with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                    pending += [int(c) for c in (task / "children").read_text().split()]
        return found

    def worker_pid(self) -> int | None:
        for pid in self.pids()[1:]:
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                if b"worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                    return pid
        return None

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


# -- the faults ----------------------------------------------------------------------------


class Fault(Protocol):
    name: str
    directory: Path
    causes: tuple[str, ...]
    """What the 503's detail and the log line must name (one of them)."""

    def begin(self, pids: list[int]) -> None: ...

    def end(self, pids: list[int]) -> None: ...

    def close(self) -> None: ...


class MountRefused(Exception):
    pass


class TmpfsFull:
    """A small tmpfs holding the database, filled to the brim by a filler file."""

    name: str = "SQLite disk full (tmpfs filled, then the filler deleted)"
    causes: tuple[str, ...] = ("database or disk is full (SQLITE_FULL)",)

    def __init__(self, base: Path) -> None:
        self.directory = base / "tmpfs"
        self.directory.mkdir()
        mount = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(self.directory)],
            capture_output=True,
            text=True,
        )
        if mount.returncode != 0:
            raise MountRefused(mount.stderr.strip() or f"mount exited {mount.returncode}")
        self.filler = self.directory / "filler"

    def begin(self, pids: list[int]) -> None:
        descriptor = os.open(self.filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for chunk in (1 << 16, 1 << 12, 1 << 9, 1):  # to the last byte
                with contextlib.suppress(OSError):
                    while True:
                        os.write(descriptor, b"\0" * chunk)
        finally:
            os.close(descriptor)
        assert os.statvfs(self.directory).f_bavail == 0, "the tmpfs is not full"

    def end(self, pids: list[int]) -> None:
        self.filler.unlink()

    def close(self) -> None:
        if subprocess.run(["umount", str(self.directory)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(self.directory)], check=True)


class FileSizeLimit:
    """RLIMIT_FSIZE on every process of the server tree: no file may be written past 4 KiB."""

    causes: tuple[str, ...] = ("disk I/O error (SQLITE_IOERR_WRITE)",)

    def __init__(self, base: Path) -> None:
        self.directory = base
        self.name = "SQLite file size limit (RLIMIT_FSIZE 4 KiB, then lifted)"

    def begin(self, pids: list[int]) -> None:
        for pid in pids:
            hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)[1]
            # The soft limit only: lowering the hard one could not be undone from outside.
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, hard))

    def end(self, pids: list[int]) -> None:
        for pid in pids:  # a worker restarted meanwhile inherited the limit: pass them all
            _soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (hard, hard))

    def close(self) -> None:
        pass


class ImmutableFiles:
    """`chattr +i` on the database file and its WAL: every write to them fails."""

    name: str = "SQLite database read-only (chattr +i on the file and its WAL, then -i)"
    causes: tuple[str, ...] = (
        "disk I/O error (SQLITE_IOERR_WRITE)",
        "attempt to write a readonly database (SQLITE_READONLY)",
    )

    def __init__(self, base: Path) -> None:
        self._cleanup: Path | None = None
        self.directory = base / "immutable"
        self.directory.mkdir()
        if not _immutable_enforced(self.directory):
            # tmp_path may be on tmpfs (not enforced on open files): try the project's disk.
            self.directory = Path(tempfile.mkdtemp(prefix=".reliability-", dir=ROOT))
            self._cleanup = self.directory
            if not _immutable_enforced(self.directory):
                raise AssertionError(
                    "chattr +i does not stop writes on open files here (tried the test's "
                    "temporary directory and the project's): this case cannot run"
                )
        self.files = [self.directory / "inbox.db", self.directory / "inbox.db-wal"]
        self.frozen = False

    def begin(self, pids: list[int]) -> None:
        subprocess.run(["chattr", "+i", *map(str, self.files)], check=True)
        self.frozen = True

    def end(self, pids: list[int]) -> None:
        subprocess.run(["chattr", "-i", *map(str, self.files)], check=True)
        self.frozen = False

    def close(self) -> None:
        if self.frozen:
            subprocess.run(["chattr", "-i", *map(str, self.files)], check=False)
        if self._cleanup is not None:
            for path in self._cleanup.iterdir():
                path.unlink()
            self._cleanup.rmdir()


def _immutable_enforced(directory: Path) -> bool:
    """Whether `chattr +i` here makes a write on an already open descriptor fail."""
    probe = directory / "immutable-probe"
    descriptor = os.open(probe, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode:
            return False
        try:
            os.write(descriptor, b"x")
        except PermissionError:
            return True
        return False
    finally:
        subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
        os.close(descriptor)
        probe.unlink()


@contextlib.contextmanager
def made_fault(kind: str, base: Path) -> Iterator[Fault]:
    fault: Fault
    if kind == "disk-full":
        try:
            fault = TmpfsFull(base)
        except MountRefused as refused:
            fault = FileSizeLimit(base)
            fault.name = f"SQLite disk full (mount refused: {refused}; RLIMIT_FSIZE instead)"
    elif kind == "file-size":
        fault = FileSizeLimit(base)
    else:
        fault = ImmutableFiles(base)
    try:
        yield fault
    finally:
        fault.close()


# -- deliveries ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    event_id: str
    status: int
    retry_after: str | None
    outcome: str
    detail: str


def deliver(client: httpx.Client, number: int) -> Answer:
    headers, body = stripe_delivery(checkout_event(number), orders.STRIPE_SECRET)
    response = client.post("/webhooks/stripe", content=body, headers=headers)
    try:
        payload = response.json()
    except ValueError:
        payload = {}
    outcome = str(payload.get("status") if response.is_success else payload.get("error"))
    return Answer(
        f"evt_{number}",
        response.status_code,
        response.headers.get("retry-after"),
        outcome,
        str(payload.get("detail", "")),
    )


def read_only(database: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{database}?mode=ro", uri=True)


def stored_ids(database: Path, event_ids: list[str]) -> set[str]:
    if not event_ids:
        return set()
    marks = ",".join("?" * len(event_ids))
    with contextlib.closing(read_only(database)) as connection:
        rows = connection.execute(
            f"SELECT event_id FROM hookinbox_events WHERE event_id IN ({marks})", event_ids
        )
        return {row[0] for row in rows}


# -- the test ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["disk-full", "file-size", "read-only"])
def test_sqlite_write_fault_is_refused_with_503_and_heals_without_restart(
    kind: str, tmp_path: Path
) -> None:
    with made_fault(kind, tmp_path) as fault:
        database = fault.directory / "inbox.db"
        url = f"sqlite:///{database}"
        orders.create_tables(url)  # before serve migrates: the shop's own tables
        server = Server(url)
        answers: list[Answer] = []
        stack = contextlib.ExitStack()
        try:
            server.wait_ready()
            worker = server.worker_pid()
            client = stack.enter_context(httpx.Client(base_url=server.base_url, timeout=30))
            before = [deliver(client, n) for n in range(BEFORE)]
            assert [a.outcome for a in before] == ["accepted"] * BEFORE, before
            answers += before

            began = time.monotonic()
            fault.begin(server.pids())
            during: list[Answer] = []
            number = BEFORE
            while len(during) < MAX_DURING_FAULT:
                during.append(deliver(client, number))
                number += 1
                if len(during) >= REFUSED_IN_A_ROW and all(
                    a.status == 503 for a in during[-REFUSED_IN_A_ROW:]
                ):
                    break
            held = time.monotonic() + HOLD
            while time.monotonic() < held:
                during.append(deliver(client, number))
                number += 1
                time.sleep(0.1)
            answers += during
            readyz = httpx.get(server.base_url + "/readyz", timeout=10).status_code
            assert readyz == 503, f"/readyz answered {readyz} during {fault.name}"
            refused = [a for a in during if a.status == 503]
            assert refused, f"the fault never took hold in {len(during)} deliveries"
            assert {a.status for a in during} <= {200, 503}, Counter(a.status for a in during)
            assert all(a.retry_after for a in refused), refused
            assert all(any(c in a.detail for c in fault.causes) for a in refused), refused
            # Nothing of a refused delivery was written (read while the fault holds).
            assert not stored_ids(database, [a.event_id for a in refused])

            fault.end(server.pids())
            fault_seconds = time.monotonic() - began
            # The provider's retries of the refused events, then new events.
            retried = [deliver(client, int(a.event_id[4:])) for a in refused]
            fresh = [deliver(client, n) for n in range(number, number + AFTER)]
            answers += retried + fresh
            assert [a.outcome for a in retried] == ["accepted"] * len(retried), retried
            assert [a.outcome for a in fresh] == ["accepted"] * AFTER, fresh

            acknowledged = {a.event_id for a in answers if 200 <= a.status < 300}
            wait_for(
                lambda: processed_count(database) == len(acknowledged),
                timeout=60,
                what="every acknowledged event to be processed",
                describe=server.output,
            )
            assert server.process.poll() is None, server.output()
            assert server.worker_pid() == worker, "the worker was restarted: " + server.output()
        finally:
            stack.close()
            code = server.stop()
        output = server.output()
        assert code == 0, output
        assert "Traceback" not in output, output
        assert "worker exited" not in output, output
        cause_lines = [
            line
            for line in output.splitlines()
            if REFUSAL_CAUSE_LINE in line and any(c in line for c in fault.causes)
        ]
        assert cause_lines, output

        with contextlib.closing(read_only(database)) as connection:
            integrity = connection.execute("PRAGMA integrity_check").fetchall()
            stored = Counter(
                row[0]
                for row in connection.execute(
                    "SELECT event_id FROM hookinbox_events WHERE status = 'processed'"
                )
            )
            applied = Counter(
                row[0] for row in connection.execute("SELECT event_id FROM applied_checkouts")
            )
            effects = Counter(row[0] for row in connection.execute("SELECT event_id FROM orders"))
        assert integrity == [("ok",)], integrity
        lost = sorted(e for e in acknowledged if not stored[e] or not applied[e] or not effects[e])
        doubled = sum(n - 1 for n in applied.values() if n > 1) + sum(
            n - 1 for n in effects.values() if n > 1
        )
        unacknowledged_stored = set(stored) - acknowledged
        assert lost == [], lost
        assert doubled == 0, (applied, effects)
        assert not unacknowledged_stored, unacknowledged_stored

    statuses = Counter(a.status for a in answers)
    record(
        Trial(
            fault=fault.name,
            backend="sqlite",
            deliveries=len(answers),
            restarts=output.count("worker exited"),
            lost=len(lost),
            doubled=doubled,
            detail=(
                f"answers {dict(sorted(statuses.items()))}: {len(before)} accepted before, "
                f"{len(refused)} of {len(during)} refused 503 with Retry-After during, "
                f"{len(retried)} retried and {len(fresh)} new accepted after "
                f"({fault_seconds:.1f} s of fault, no restart); /readyz during: {readyz}; "
                f"integrity_check ok; log: {cause_lines[0].split(': ', 1)[-1][:160]}"
            ),
        )
    )


def processed_count(database: Path) -> int:
    with contextlib.closing(read_only(database)) as connection:
        row = connection.execute(
            "SELECT COUNT(*) FROM hookinbox_events WHERE status = 'processed'"
        ).fetchone()
    return int(row[0])


def test_connections_opened_while_read_only_do_not_outlive_the_fault(tmp_path: Path) -> None:
    """SQLite opens a file it may not write read-only, silently, for good. Pooled, such a
    connection refused every write long after the file was writable again (the worker above
    burnt attempts on it for a minute). At most one write may fail once the fault is over."""
    with made_fault("read-only", tmp_path) as fault:
        store = Store(f"sqlite:///{fault.directory / 'inbox.db'}")
        try:
            store.migrate()
            with store.transaction() as connection:
                connection.execute(sa.text("CREATE TABLE probe (n INTEGER)"))

            def write(n: int) -> str:
                try:
                    with store.transaction() as connection:
                        connection.execute(sa.text("INSERT INTO probe VALUES (:n)"), {"n": n})
                except StoreUnavailable:
                    return "503"
                return "ok"

            fault.begin([])
            # Connections opened now (held together, so the pool opens new ones) are read-only.
            held = [store.engine.connect() for _ in range(4)]
            for connection in held:
                connection.close()
            during = write(0)
            fault.end([])
            after = [write(n) for n in range(1, 13)]
            with store.reading() as connection:
                rows = connection.execute(sa.text("SELECT n FROM probe ORDER BY n")).scalars()
                stored = list(rows)
        finally:
            store.dispose()
    acknowledged = {n for n, answer in enumerate(after, start=1) if answer == "ok"}
    lost = len(acknowledged - set(stored))
    doubled = len(stored) - len(set(stored))
    assert during == "503"
    assert after[1:] == ["ok"] * 11, after
    assert set(stored) == acknowledged and lost == doubled == 0, stored
    record(
        Trial(
            fault="SQLite connections opened while the file was read-only, then writable",
            backend="sqlite",
            deliveries=1 + len(after),
            lost=lost,
            doubled=doubled,
            detail=(
                f"4 connections opened during the fault; write during: {during}; "
                f"12 writes after: {dict(Counter(after))} (a stale read-only connection is dropped "
                "with the pool at its first refused write)"
            ),
        )
    )
