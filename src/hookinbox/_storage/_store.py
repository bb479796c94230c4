"""`Store`: the narrow door to the database that every other layer goes through.

A store is an engine, its dialect (`_dialects/`: everything that differs between databases),
the transactions every gateway runs in, and the gateways, one per role:

- `ingest`: store deliveries (one, or group commit's batches) and read an event back;
- `events` and `messages`: the worker's and the relay's leased queues (one class, `_queue.py`);
- `outbox`: messages written in a handler's transaction, and what operators read of them;
- `ordering`: the ordering guard's marks;
- `operator`: list, show, search, replay and audit events; the dashboard's sessions;
- `housekeeping`: retention, the daily jobs, the space a prune frees;
- `liveness`: the workers' heartbeats;
- `stats`: the figures of `status`, the gauges and the dashboard;
- `encryption`: bodies and headers rewritten under the newest key, the keys checked at start;
- `erasure`: delete events' bodies and headers (keeping the key and the log), audited.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import count_deadlock_retry
from hookinbox._model import Event
from hookinbox._storage import _migrations
from hookinbox._storage._compatibility import Planned, SchemaStatus
from hookinbox._storage._dialects import Dialect, build_engine, dialect_of
from hookinbox._storage._encryption import Encryption
from hookinbox._storage._erasure import Erasure
from hookinbox._storage._errors import is_deadlock, translate_errors
from hookinbox._storage._housekeeping import Housekeeping
from hookinbox._storage._ingest import Ingest
from hookinbox._storage._liveness import Liveness
from hookinbox._storage._operator import Operator
from hookinbox._storage._options import READ_ONLY, StoreOptions
from hookinbox._storage._ordering import Ordering
from hookinbox._storage._outbox import Outbox
from hookinbox._storage._pausing import Pausing
from hookinbox._storage._queue import EventQueue, MessageQueue
from hookinbox._storage._stats import Stats
from hookinbox._storage._trust import Trust

log = logger("hookinbox._storage")
T = TypeVar("T")


class WriterLock(Protocol):
    """A process's turn at SQLite's one write lock (a thread's `RLock`, or an event loop's)."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...


DEADLOCK_TRIES = 3
"""Runs of a transaction of hookinbox's own that a deadlock may cost before its error goes up
(503 for a delivery): the first and two more. The victim's rival holds its locks only until
it commits, so a second run rarely meets the same deadlock; a third that does is contention
a pause of milliseconds will not clear, and the provider's retry (or the next prune batch)
is the better wait."""
DEADLOCK_PAUSE = 0.01
"""Seconds before a retry, times the retry's number, jittered by half either way: the two
victims of one rivalry (two processes' batches) do not start again in step."""


class Store:
    """A database holding hookinbox's tables, reached through a pooled engine.

    Every method translates "database unavailable" into `StoreUnavailable`. The schema is
    created or upgraded on first use unless `auto_migrate=False`.
    """

    def __init__(
        self,
        url: str | URL,
        options: StoreOptions | None = None,
        *,
        auto_migrate: bool = True,
        after_migrate: Sequence[_migrations.AfterMigrate] = (),
        engine: Engine | None = None,
        writer: WriterLock | None = None,
    ) -> None:
        """`engine`: one built by a framework adapter (hookinbox.django), or an async engine's
        sync facade (`AsyncStore`); `url` names it. `writer`: SQLite's turn among this
        process's writers, where a thread lock will not do (the tasks of one event loop)."""
        self.options = options or StoreOptions()
        self.after_migrate = tuple(after_migrate)
        self.engine: Engine = engine if engine is not None else build_engine(url, self.options)
        # Everything that differs between databases is the dialect's; an engine of a database
        # hookinbox does not know (a framework's) is refused here, in one line.
        self.dialect: Dialect = dialect_of(self.engine)
        self.auto_migrate = auto_migrate
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        # SQLite admits one writer. Left to SQLite alone, the threads of one process that wait
        # for it poll with growing sleeps (SQLite's busy handler), and the holder may wait for
        # the GIL while it holds the lock: throughput falls and p99 climbs to seconds. A
        # process-wide lock queues this process's writers instead, handing over at once;
        # between processes, each polls for SQLite's lock (`_engine._poll_for_write_lock`).
        # Re-entrant, so a handler that opens a second transaction fails on SQLite's timeout
        # as before instead of hanging here.
        self._writer: WriterLock | None = None
        if self.dialect.single_writer:
            self._writer = writer or threading.RLock()
        self.ingest = Ingest(self)
        self.events = EventQueue(self)
        self.messages = MessageQueue(self)
        self.outbox = Outbox(self)
        self.ordering = Ordering(self)
        self.operator = Operator(self)
        self.housekeeping = Housekeeping(self)
        self.liveness = Liveness(self)
        self.trust = Trust(self)
        self.pausing = Pausing(self)
        self.erasure = Erasure(self, self.operator)
        self.stats = Stats(self, self.outbox, self.liveness)
        self.encryption = Encryption(self)

    @property
    def url(self) -> URL:
        return self.engine.url

    def migrate(self, target: int = _migrations.LATEST_VERSION) -> tuple[int, int]:
        """Create or upgrade the schema (to `target`, the latest by default); returns
        (version before, version after)."""
        result = _migrations.migrate(self.engine, self.after_migrate, target=target)
        self._schema_ready = True
        return result

    def schema_status(self) -> SchemaStatus:
        """Where the database's schema stands for this code (`hookinbox migrate --check`);
        reads only."""
        return _migrations.schema_status(self.engine)

    def migration_plan(self, version: int) -> list[Planned]:
        """The steps `migrate` would run on a database at `version`, each with the oldest
        code that runs on the database after it."""
        return _migrations.plan(version)

    def assume_schema(self) -> None:
        """The schema was migrated or checked by another store of this process on the same
        database (the async worker's store, after the sync store's `ensure_schema`)."""
        self._schema_ready = True

    def ensure_schema(self) -> None:
        """Once per process: migrate (or, with auto_migrate off, check the version)."""
        if self._schema_ready:
            return
        with self._schema_lock:
            if self._schema_ready:
                return
            if self.auto_migrate:
                self.migrate()
            else:
                _migrations.check_version(self.engine)
                self._schema_ready = True

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One transaction: committed on success, rolled back on any exception."""
        self.ensure_schema()
        with self.writing(), self._begin() as connection:
            yield connection

    def owns_transactions(self) -> bool:
        """True when a transaction begun now is hookinbox's own, outermost one; False inside
        a caller's (a Django `atomic()` block), whose earlier writes a deadlock rolled back
        too: only the caller may run that again."""
        return True

    def retry_deadlocks(self, work: Callable[[], T], operation: str) -> T:
        """`work()`, which runs one transaction of hookinbox's own (nothing of a user's in
        it: ingest, reconcile's page, a prune batch, a scheduled job's claim) and may therefore
        run again: when the database chose it as a deadlock's victim (rolled back whole,
        nothing of it written), it is run again in a fresh transaction after a short, jittered
        pause, up to `DEADLOCK_TRIES` runs in all, before the error goes up (`StoreUnavailable`:
        503). Counted in `hookinbox_deadlock_retries_total{operation}` and logged.

        Not for a worker's processing transaction (the claim, the user's handlers and the
        processed mark): a deadlock rolls the handlers' writes back with it, the attempt
        fails and the event stays due, retried by the worker on its schedule; nor for inline
        handlers, whose deadlock is a 503 the provider retries."""
        tries = DEADLOCK_TRIES if self.owns_transactions() else 1
        for run in range(1, tries + 1):
            try:
                return work()
            except StoreUnavailable as error:
                if not is_deadlock(error):
                    raise
                if run == tries:
                    if tries > 1:
                        log.warning("%s: still a deadlock's victim after %d runs: %s",
                                    operation, run, error)  # fmt: skip
                    raise
                count_deadlock_retry(operation)
                log.warning("%s: the database chose its transaction as a deadlock's victim "
                            "(rolled back, nothing written); running it again (%d of %d)",
                            operation, run + 1, tries)  # fmt: skip
                time.sleep(DEADLOCK_PAUSE * run * random.uniform(0.5, 1.5))
        raise AssertionError("unreachable: the last run returns or raises")

    @contextmanager
    def housekeeping_transaction(self) -> Iterator[Connection]:
        """A transaction whose commit need not be durable on its own (the pruner's deletes:
        lost to a power cut, they are made again by the next prune); the dialect decides what
        that saves (SQLite: the commit's fsync). Elsewhere, `transaction()`."""
        with self.dialect.housekeeping(self) as connection:
            yield connection

    @contextmanager
    def writing(self) -> Iterator[None]:
        """This process's turn at SQLite's one writer, for a write made outside `transaction`
        (a pragma that must run as a script); nothing on PostgreSQL."""
        if self._writer is None:
            yield
            return
        if not self._writer.acquire(timeout=self.options.busy_timeout):
            raise StoreUnavailable("database unavailable: the SQLite write lock is busy")
        try:
            yield
        finally:
            self._writer.release()

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        """Begin and end the database transaction (the Django store lets `atomic()` do it)."""
        with translate_errors(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        """A read-only transaction: on SQLite a deferred BEGIN that does not take the write lock."""
        self.ensure_schema()
        with translate_errors(), self.engine.connect() as connection:
            connection.execution_options(**{READ_ONLY: True})
            with connection.begin():
                yield connection

    def refuse_aborted(self, connection: Connection) -> None:
        """Before a processing transaction commits: fail loudly if an earlier statement
        aborted it (a PostgreSQL error that a handler caught and ignored), so that the attempt
        cannot pass for a success. SQLite keeps a transaction usable after an error."""
        self.dialect.refuse_aborted(connection)

    def check_body_limit(self, max_body_size: int) -> None:
        """Raise `ConfigurationError` if the database cannot store a body of `max_body_size`
        bytes in one statement (MariaDB's `max_allowed_packet`: asked over a connection);
        `StoreUnavailable` if it cannot be asked now."""
        self.dialect.check_body_limit(self, max_body_size)

    def ping(self) -> None:
        """Raise `StoreUnavailable` unless the database takes a write now, as a delivery's
        would be: a standby or a server made read-only (PostgreSQL), a read-only, full or
        size-limited file (SQLite), a commit that cannot be made durable, are not ready.

        The write is a delivery's in miniature: the schema version row rewritten as it is. It
        must write a row: on PostgreSQL a transaction that only takes an id (`txid_current()`)
        commits without waiting for the WAL flush or the synchronous standby, so it answered
        while every delivery's commit waited for a standby still reconnecting after a primary
        restart (tests/ha caught `/readyz` saying 200 through such a 5 s stall).
        On SQLite, a page through the WAL."""
        with translate_errors(), self.engine.connect() as connection:
            self.dialect.check_writable(connection)
        with self.transaction() as connection:
            connection.execute(_PROBE_WRITE)

    def get_event(self, source: str, event_id: str) -> Event | None:
        """The event stored under (source, event_id), as it is now (`ingest.get_event`)."""
        return self.ingest.get_event(source, event_id)

    def dispose(self) -> None:
        self.engine.dispose()


_PROBE_WRITE = sa.text(
    "UPDATE hookinbox_schema_versions SET version = version"
    " WHERE version = (SELECT max(version) FROM hookinbox_schema_versions)"
)
"""The readiness probe's write (see `Store.ping`)."""
