"""What SQLite says of itself: its clock (this host's), other connections' commits since a
mark, and the space a prune freed, given back in short writes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from hookinbox._records import Pressure
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._errors import translate_errors

if TYPE_CHECKING:
    from hookinbox._storage._transactions import Transactions


class SQLiteState(Dialect):
    """The part of the dialect that answers for the database's own state."""

    def now(self, connection: Connection) -> datetime:
        """A file on this host: every process that opens it shares this host's clock."""
        return datetime.now(UTC)

    def pressure_mark(self, connection: Connection) -> object:
        # Changes whenever another connection, of this process or another, has committed.
        return connection.exec_driver_sql("PRAGMA data_version").scalar_one()

    def pressure_since(self, connection: Connection, mark: object) -> Pressure:
        version = connection.exec_driver_sql("PRAGMA data_version").scalar_one()
        return Pressure(int(version != mark), 0)

    def checkpoint_passive(self, store: Transactions) -> None:
        with translate_errors():
            raw = store.engine.raw_connection()
            try:  # outside any transaction: a checkpoint cannot run inside one
                driver: Any = raw.driver_connection
                driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                raw.close()

    def free_pages(self, store: Transactions) -> int:
        with translate_errors(), store.engine.connect() as connection:
            return int(connection.exec_driver_sql("PRAGMA freelist_count").scalar_one())

    def give_back_pages(self, store: Transactions, pages: int) -> int:
        with store.writing(), translate_errors():
            raw = store.engine.raw_connection()
            try:
                driver: Any = raw.driver_connection
                if driver.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # 2: INCREMENTAL
                    return 0
                before = driver.execute("PRAGMA freelist_count").fetchone()[0]
                # As a script: sqlite3's execute() would step the pragma once, one page.
                script = f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({int(pages)}); COMMIT;"
                driver.executescript(script)
                after = driver.execute("PRAGMA freelist_count").fetchone()[0]
            finally:
                raw.close()
        return int(before) - int(after)
