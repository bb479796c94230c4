"""Real InnoDB deadlocks on the MariaDB test server, with hookinbox's transaction the victim.

A deadlock needs two transactions that each hold a row lock the other asks for. The test's
`Rival` is the second one: a session of its own that locks rows in the order opposite to
hookinbox's write. InnoDB rolls back the transaction that weighs less (rows changed plus
locks held), so the rival first changes `WEIGHT_ROWS` rows of a table of its own: heavier than
any transaction hookinbox makes in these tests, it is never the one chosen.

Nothing is assumed to have happened: `waiting_for_a_lock` reads InnoDB's own list of
transactions, and `latest_deadlock` its report of the last deadlock (`SHOW ENGINE INNODB
STATUS`), which says which transaction was rolled back; a test asserts that it was not the
rival's, and that the rival's session took part (so the report is this test's deadlock, not
one of another test on the shared server).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import make_url

CACHE_IDLE = 0.15
"""Seconds between reads of `information_schema.innodb_trx`: InnoDB refreshes the cache behind
it only when it was last read over 0.1 s ago, so a faster poll reads the same rows forever."""
WEIGHT_ROWS = 2_000
WEIGHT_TABLE = "rival_weight"


def engine_for(database_url: str) -> sa.Engine:
    """A pool-less engine on the same database, in READ COMMITTED as hookinbox's sessions."""
    url = make_url(database_url).set(drivername="mysql+pymysql")
    return sa.create_engine(url, poolclass=sa.NullPool, isolation_level="READ COMMITTED")


def create_weight(database_url: str) -> None:
    """The rival's ballast: `WEIGHT_ROWS` rows it updates before it takes any lock."""
    engine = engine_for(database_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE TABLE {WEIGHT_TABLE} (id INT PRIMARY KEY, n INT)")
        connection.exec_driver_sql(
            f"INSERT INTO {WEIGHT_TABLE} SELECT seq, 0 FROM seq_1_to_{WEIGHT_ROWS}"
        )
    engine.dispose()


@dataclass
class Rival:
    """An open transaction of the test's; `lock` waits as long as InnoDB makes it."""

    connection: sa.Connection
    thread_id: int

    def lock(self, table: str, where: str, *parameters: object) -> int:
        """SELECT ... FOR UPDATE: the rows found (0 once a victim's insert was rolled back)."""
        query = f"SELECT 1 FROM {table} WHERE {where} FOR UPDATE"
        return len(self.connection.exec_driver_sql(query, parameters).all())

    def lock_event(self, event_id: str) -> int:
        return self.lock("hookinbox_events", "source = 'stripe' AND event_id = %s", event_id)

    def commit(self) -> None:
        self.connection.commit()

    def rollback(self) -> None:
        self.connection.rollback()


@contextmanager
def rival(database_url: str, *, heavy: bool = True) -> Iterator[Rival]:
    """A transaction begun on a session of its own; heavy: `WEIGHT_ROWS` rows changed first
    (`create_weight` made them). Rolled back on exit unless the test committed it."""
    engine = engine_for(database_url)
    try:
        with engine.connect() as connection:
            thread_id = int(connection.exec_driver_sql("SELECT CONNECTION_ID()").scalar_one())
            if heavy:
                connection.exec_driver_sql(f"UPDATE {WEIGHT_TABLE} SET n = n + 1")
            yield Rival(connection, thread_id)
            connection.rollback()
    finally:
        engine.dispose()


class Observer:
    """A third session that reads InnoDB's transactions and its last deadlock report."""

    def __init__(self, database_url: str) -> None:
        self.engine = engine_for(database_url)
        self.connection = self.engine.connect()
        self.connection.execution_options(isolation_level="AUTOCOMMIT")
        self.seen: set[int] = set()

    def close(self) -> None:
        self.connection.close()
        self.engine.dispose()

    def waiting_for_a_lock(self, *, besides: tuple[int, ...] = ()) -> int | None:
        """The id of a transaction of this database's sessions, not the rivals' (`besides`)
        and not reported before, that waits for a row lock now; else None."""
        rows = self.connection.exec_driver_sql(
            "SELECT t.trx_id, t.trx_mysql_thread_id FROM information_schema.innodb_trx t"
            " JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id"
            " WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()"
        ).all()
        for trx_id, thread_id in rows:
            if int(thread_id) not in besides and int(trx_id) not in self.seen:
                self.seen.add(int(trx_id))
                return int(trx_id)
        return None

    def wait_for_a_waiter(self, *, besides: tuple[int, ...] = (), timeout: float = 10) -> int:
        """Until a new transaction of hookinbox's waits for a lock (`waiting_for_a_lock`)."""
        found: list[int] = []

        def waiting() -> bool:
            trx = self.waiting_for_a_lock(besides=besides)
            if trx is not None:
                found.append(trx)
            return bool(found)

        poll(waiting, timeout, "a hookinbox transaction waiting for a row lock", CACHE_IDLE)
        return found[0]

    def latest_deadlock(self) -> Deadlock:
        status = str(self.connection.exec_driver_sql("SHOW ENGINE INNODB STATUS").one()[2])
        return Deadlock.parse(status)


@dataclass(frozen=True)
class Deadlock:
    """InnoDB's report of the last deadlock it broke: each transaction's session (thread id)
    and statement text, and which one it rolled back."""

    sessions: dict[int, int]
    """Transaction number in the report (1, 2) -> its session's thread id."""
    texts: dict[int, str]
    rolled_back: int

    @classmethod
    def parse(cls, status: str) -> Deadlock:
        start = status.find("LATEST DETECTED DEADLOCK")
        assert start >= 0, "InnoDB reports no deadlock at all"
        section = status[start:]
        end = section.find("\nTRANSACTIONS\n")
        section = section if end < 0 else section[:end]
        parts = re.split(r"\*\*\* \((\d+)\) TRANSACTION:", section)
        sessions: dict[int, int] = {}
        texts: dict[int, str] = {}
        for number, text in zip(parts[1::2], parts[2::2], strict=True):
            thread = re.search(r"(?:MySQL|MariaDB) thread id (\d+)", text)
            assert thread is not None, text
            sessions[int(number)] = int(thread[1])
            texts[int(number)] = text
        rolled_back = re.search(r"\*\*\* WE ROLL BACK TRANSACTION \((\d+)\)", section)
        assert rolled_back is not None, section
        return cls(sessions, texts, int(rolled_back[1]))

    def victim_session(self) -> int:
        return self.sessions[self.rolled_back]

    def victim_text(self) -> str:
        return self.texts[self.rolled_back]


def retries(operation: str) -> float:
    """hookinbox's count of deadlock victims run again in this process, for `operation`."""
    from prometheus_client import REGISTRY

    found = REGISTRY.get_sample_value("hookinbox_deadlock_retries_total", {"operation": operation})
    return found or 0.0


def poll(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.005) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
