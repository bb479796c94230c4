"""SQLite's WAL checkpoints run on a thread beside the group-commit writer, not inside it.

Real files in tmp_path. The WAL's state is read from its index (the `-shm` file), not through
a connection: `PRAGMA wal_checkpoint` would checkpoint by itself, and a connection closing
last would checkpoint and delete the WAL. The index is read on a descriptor kept open until
every connection is closed: closing any descriptor of a file drops all of the process's POSIX
locks on it, SQLite's among them.
"""

from __future__ import annotations

import logging
import os
import resource
import sqlite3
import struct
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest

from hookinbox._model import RecordedDelivery
from hookinbox._storage import GroupCommitter, Store, _checkpoint
from tests.storage.test_batch import delivery

BODY = b'{"object": "' + b"x" * 300 + b'"}'
FRAME = 4096 + 24
"""Bytes of one WAL frame: a page of the default size and its header."""


@dataclass(frozen=True)
class Database:
    path: Path
    store: Store
    index: int
    """A descriptor of the WAL's index (`-shm`), open as long as any connection is."""

    def wal(self) -> tuple[int, int]:
        """(frames in the WAL, frames of them checkpointed): the wal-index header's mxFrame
        (byte 16) and nBackfill (byte 96), in the machine's byte order
        (sqlite.org/walformat.html)."""
        header = os.pread(self.index, 100, 0)
        return struct.unpack_from("=I", header, 16)[0], struct.unpack_from("=I", header, 96)[0]

    def checkpointed(self) -> bool:
        frames, backfilled = self.wal()
        return frames == backfilled


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    path = tmp_path / "inbox.db"
    store = Store(f"sqlite:///{path}")
    store.migrate()  # its pooled connections keep the WAL and its index
    index = os.open(f"{path}-shm", os.O_RDONLY)
    yield Database(path, store, index)
    store.dispose()
    os.close(index)  # after every connection (the index of a closed WAL is deleted anyway)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def store_many(committer: GroupCommitter, count: int, start: int = 0) -> None:
    """`count` deliveries from one thread submitting without waiting for each: batches form."""
    futures: list[Future[RecordedDelivery]] = []
    for n in range(start, start + count):
        futures.append(committer.submit(delivery("s", f"evt_{n}", BODY, n)))
        if len(futures) >= 300:  # a backlog, bounded
            futures.pop(0).result(30)
    assert all(future.result(30).is_new for future in futures)


def checkpoint_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "hookinbox-checkpoint"}


def test_the_wal_is_checkpointed_by_the_thread_once_the_writer_goes_quiet(
    db: Database,
) -> None:
    committer = GroupCommitter(db.store)
    store_many(committer, 3_000)
    frames, _ = db.wal()
    # The writer's own threshold is far above this: only the thread can fold the WAL back.
    assert 0 < frames < _checkpoint.WRITER_AUTOCHECKPOINT
    assert wait_until(db.checkpointed), db.wal()
    committer.close()


def test_the_wal_stays_bounded_under_continuous_ingest(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background checkpoint rarely ends between two batches while another thread keeps
    submitting, so SQLite seldom finds every frame checkpointed when a batch begins, the only
    moment it starts the WAL again: the writer's backstop does that (made small here for a
    short test; without it this WAL grew to 6,000-12,000 frames)."""
    monkeypatch.setattr(_checkpoint, "WRITER_AUTOCHECKPOINT", 1_000)
    committer = GroupCommitter(db.store)
    wal = Path(f"{db.path}-wal")
    largest = 0
    submitter = threading.Thread(target=store_many, args=(committer, 30_000))
    submitter.start()
    while submitter.is_alive():
        if wal.exists():
            largest = max(largest, wal.stat().st_size)
        time.sleep(0.01)
    submitter.join()
    committer.close()
    assert largest // FRAME < 2_500  # the backstop and what commits while it runs


def test_close_leaves_the_wal_checkpointed_and_the_thread_gone(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once a minute at most: the checkpoint after the second batch is close()'s own.
    monkeypatch.setattr(_checkpoint, "CHECKPOINT_INTERVAL", 60.0)
    before = checkpoint_threads()
    committer = GroupCommitter(db.store)
    store_many(committer, 1)
    (thread,) = checkpoint_threads() - before
    assert wait_until(db.checkpointed)  # the first commit's checkpoint
    store_many(committer, 100, start=100)
    assert not db.checkpointed()
    # Another connection keeps the WAL: the pool's last one would checkpoint as it closes.
    with closing(sqlite3.connect(db.path)) as other:
        other.execute("SELECT count(*) FROM hookinbox_events").fetchone()
        started = time.monotonic()
        committer.close()
        assert time.monotonic() - started < 5.0
        assert not thread.is_alive()
        frames, backfilled = db.wal()
        assert frames == backfilled > 0


def test_a_failing_checkpoint_is_logged_once_and_deliveries_are_still_stored(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """A file-size limit (RLIMIT_FSIZE) the database file has reached: the checkpoint, which
    would grow it, fails; the writer's commits, which only append to the WAL below it, do
    not. Lifted, the next commit's checkpoint goes through."""
    committer = GroupCommitter(db.store)
    store_many(committer, 500)  # a WAL long enough for what follows, without growing
    assert wait_until(db.checkpointed)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with caplog.at_level(logging.WARNING, "hookinbox._storage"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (db.path.stat().st_size, hard))
        try:
            for n in range(5):  # five rounds of commits, each followed by a failed checkpoint
                store_many(committer, 20, start=1_000 + 20 * n)
                time.sleep(2 * _checkpoint.CHECKPOINT_INTERVAL)
            assert not db.checkpointed()
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        failures = [r.getMessage() for r in caplog.records if "checkpoint failed" in r.getMessage()]
        assert len(failures) == 1, failures
        store_many(committer, 20, start=2_000)
        assert wait_until(db.checkpointed)
    committer.close()
    with db.store.reading() as connection:
        stored = connection.exec_driver_sql("SELECT count(*) FROM hookinbox_events").scalar()
    assert stored == 500 + 5 * 20 + 20
