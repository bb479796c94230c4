"""SQLite: the WAL folded back into the database beside the group-commit writer, not inside it.

In WAL mode a commit appends pages to the WAL, and a checkpoint copies them into the database
file and fsyncs it. SQLite runs the checkpoint itself inside whichever connection commits
past 1,000 pages of WAL (`wal_autocheckpoint`); in `hookinbox serve` that is usually the
group-commit writer, so the deliveries of that batch wait for the copy and the fsync, and
during a prune for the pruner's pages as well.

So a `GroupCommitter` on SQLite has a `Checkpointer`: a thread (`hookinbox-checkpoint`)
that, after the writer's commits, runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of
its own, at most once per `CHECKPOINT_INTERVAL`. Python's sqlite3 releases the GIL while
SQLite works, so the copy and the database's fsync go on beside the writer; a PASSIVE
checkpoint waits for nobody and blocks nobody (the writer keeps committing while it copies,
and another checkpoint running at the time, the pruner's, makes it return at once).

The writer keeps a checkpoint threshold of its own, raised, not 0 (`WRITER_AUTOCHECKPOINT`):
see `keep_writer_threshold`.
"""

from __future__ import annotations

import math
import threading
import time

from sqlalchemy import Connection

from hookinbox._logging import logger
from hookinbox._storage._space import checkpoint_passive
from hookinbox._storage._store import Store

log = logger("hookinbox._storage")

CHECKPOINT_INTERVAL = 0.05
"""Seconds, at least, from one background checkpoint to the next. Each one fsyncs the
database file, on the disk where the writer fsyncs the WAL at each commit: run after every
batch, a busy inbox would double its fsyncs. Run seldom, each has more pages to copy, and the
WAL grows meanwhile and reaches the writer's own threshold sooner. At 50 ms the thread stays
at most that much ingest behind the writer, for at most 20 fsyncs a second; an idle inbox
gets one checkpoint after each commit."""

WRITER_AUTOCHECKPOINT = 10_000
"""Pages of WAL past which the writer's own commit checkpoints (SQLite's default: 1,000).

Not 0 (never): SQLite starts the WAL again from its beginning only when a write transaction
begins while every frame in it is already checkpointed. Under continuous ingest the
background checkpoint rarely ends exactly between two batches (the writer commits while it
copies), so without a backstop the WAL file would grow without bound. With it, the writer
checkpoints itself once the WAL passes this many frames, which is cheap since the thread has
copied nearly all of them, and its next BEGIN restarts the WAL: the file stays near
`WRITER_AUTOCHECKPOINT` pages (40 MB of 4 KiB pages)."""

_RAISED = "hookinbox_writer_autocheckpoint"
"""Key in a pooled DB-API connection's `info`: its threshold is `WRITER_AUTOCHECKPOINT`."""


def wants_checkpointer(store: Store) -> bool:
    """SQLite on the store's own pooled connections (not a framework's, hookinbox.django)."""
    return store.dialect == "sqlite" and store.owns_connections


def keep_writer_threshold(connection: Connection) -> None:
    """In the writer's transaction: raise this connection's checkpoint threshold, once per
    DB-API connection.

    Set here, not in the engine's connect hook: that would raise it on every connection of
    every process, among them a worker or a pruner with no checkpointer beside it.
    `Connection.info` follows a pooled DB-API connection from one checkout to the next, so
    the pragma runs once per connection, not per batch. The pool is the whole process's:
    other code that takes such a connection while the checkpointer runs commits into a WAL
    the thread folds back after the writer's next commit, and at worst lets it reach the
    writer's backstop before that connection checkpoints (bounded, as the writer's). None
    outlives the committer: `GroupCommitter.close` replaces the pool.
    """
    info = connection.info
    if _RAISED not in info:
        # Through SQLAlchemy: a connection that fails here is handled as in the batch itself.
        connection.exec_driver_sql(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT}")
        info[_RAISED] = True


class Checkpointer:
    """A thread running a PASSIVE checkpoint after the writer's commits (SQLite)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hookinbox-checkpoint", daemon=True)
        self._last_error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: a checkpoint is due (set() takes a lock: once per wake-up)."""
        if not self._committed.is_set():
            self._committed.set()

    def stop(self, timeout: float) -> None:
        """Run one last checkpoint and end the thread, waiting up to `timeout` seconds."""
        self._stopping.set()
        self._committed.set()  # an idle thread waits for a commit
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        last = -math.inf
        while True:
            self._committed.wait()
            remaining = last + CHECKPOINT_INTERVAL - time.monotonic()
            if remaining > 0:
                self._stopping.wait(remaining)  # the commits meanwhile join this checkpoint
            if self._stopping.is_set():
                break
            # Cleared before it runs: a commit made while it copies asks for the next one.
            self._committed.clear()
            last = time.monotonic()
            self.checkpoint()
        self.checkpoint()  # after the writers stopped: the WAL left folded back

    def checkpoint(self) -> None:
        """One PASSIVE checkpoint. A failure (a full disk, a file-size limit, a closed
        database) is logged once per distinct error and never raised: the next commit asks
        for another try."""
        try:
            checkpoint_passive(self.store)
        except Exception as error:
            message = f"{type(error).__name__}: {error}"
            code = getattr(error, "sqlite_errorname", None)  # "disk I/O error" says little
            if code:
                message = f"{message} ({code})"
            if message != self._last_error:
                self._last_error = message
                log.warning("WAL checkpoint failed (tried again after the next commit): %s",
                            message)  # fmt: skip
        else:
            self._last_error = None
