"""How busy the database is with other work, read from the database itself.

The pruner paces itself by it (`hookinbox._operations._pacing`): a database that serves
deliveries and workers gets short batches with long pauses, an idle one long batches back to
back. The gauge measures a window: `mark()` once the pruner's own transaction has committed,
`sample()` when it is about to start the next, so the pruner never counts itself.

- PostgreSQL (`pg_stat_activity`, which is live, unlike the cumulative statistics that
  backends flush about once a second): the other client sessions of this database that ran
  something during the window (active now, or changed state since the mark), and those
  waiting now for a lock or for I/O, which is how the pruner's work shows up in theirs.
- SQLite: `PRAGMA data_version` on a connection of the gauge's own changes whenever another
  connection, of this process or another, has committed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Connection

from hookinbox._records import IDLE, Pressure

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

from hookinbox._storage._errors import translate_errors
from hookinbox._storage._options import READ_ONLY


class PressureGauge:
    """Samples `Pressure` on a connection of its own; `close()` when done."""

    def __init__(self, store: StoreSeam) -> None:
        self.dialect = store.dialect
        with translate_errors():
            self._connection: Connection = store.engine.connect()
        # It only reads: on SQLite a deferred BEGIN, which never queues for the write lock
        # (BEGIN IMMEDIATE did, twice per batch, in the way of the deliveries it measures).
        self._connection.execution_options(**{READ_ONLY: True})
        self._mark: object | None = None

    def mark(self) -> None:
        """The pruner's own transaction is over: the window starts."""
        with translate_errors():
            self._mark = self.dialect.pressure_mark(self._connection)
            self._connection.rollback()

    def sample(self) -> Pressure:
        """Other work since `mark()`."""
        if self._mark is None:
            return IDLE
        with translate_errors():
            # A new transaction each time: PostgreSQL reads pg_stat_activity once per one.
            pressure = self.dialect.pressure_since(self._connection, self._mark)
            self._connection.rollback()
            return pressure

    def close(self) -> None:
        self._connection.close()
