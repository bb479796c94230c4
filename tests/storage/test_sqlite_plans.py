"""Every status look-up on SQLite reads a small table or a partial index, never the events.

SQLite uses a partial index only when it can prove while planning that the query's WHERE
implies the index's, and it proves that from constants and repeated terms only: a bound
`status IN (?, ?)` or a bare `status = 'failed'` (for an index on the statuses that are not
done) proves nothing, and the look-up scans every row ever received (bench/README.md: the
worker drained 4 events/s at a million rows). Each statement below is captured as hookinbox
issues it and planned again with `EXPLAIN QUERY PLAN`. Since schema 9 the events' open work is
in its own table (`hookinbox_event_queue`), which holds only events that are not done: reading
all of it is reading the small set, as reading the partial indexes was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox._model import Status
from hookinbox._records import EventFilter
from hookinbox._storage import Store

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SMALL_INDEXES = re.compile(
    r"USING (COVERING )?INDEX ix_hookinbox_(events|outbox)_(open|due|leased)"
)
"""The partial indexes: a scan of one of them reads only the rows that are not done."""


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store(f"sqlite:///{tmp_path / 'plans.db'}")
    store.migrate()
    yield store
    store.dispose()


@contextmanager
def captured(store: Store) -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        statements.append((statement, parameters))

    sa.event.listen(store.engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", record)


def full_scans(store: Store, statements: list[tuple[str, Any]]) -> list[str]:
    """The plan lines that read a whole inbox table (or the whole of a large index)."""
    found: list[str] = []
    with store.engine.connect() as connection:
        for statement, parameters in statements:
            if not re.search(r"hookinbox_(events|outbox)\b", statement):
                continue
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            for row in plan:
                detail = str(row[-1])
                if re.match(r"SCAN (hookinbox_events|hookinbox_outbox|earlier)\b", detail) and (
                    not SMALL_INDEXES.search(detail)
                ):
                    found.append(f"{detail}  <-  {statement}")
    return found


LOOK_UPS: dict[str, Callable[[Store], object]] = {
    "worker: is anything due": lambda s: s.events.has_due(NOW),
    "worker: when is the next retry": lambda s: s.events.next_due_at(),
    "worker: lease": lambda s: s.events.lease(limit=4, now=NOW, until=NOW),
    "relay: is anything due": lambda s: s.messages.has_due(NOW),
    "relay: when is the next retry": lambda s: s.messages.next_due_at(),
    "relay: lease": lambda s: s.messages.lease(limit=4, now=NOW, until=NOW),
    **{
        f"operator: events --status {status.value}": (
            lambda s, status=status: s.operator.list_events(EventFilter(status=status), 50)
        )
        for status in (Status.FAILED, Status.DEFERRED, Status.PENDING, Status.PROCESSING)
    },
    "operator: count of failed": lambda s: s.operator.count_events(
        EventFilter(status=Status.FAILED)
    ),
}
READS: dict[str, Callable[[Store, sa.Connection], object]] = {
    "status: open figures": lambda s, c: s.stats.open_figures(c, NOW),
    "status: waiting": lambda s, c: s.stats.waiting_count(c),
    "status: outbox backlog": lambda s, c: s.outbox.backlog(c),
    "dashboard: failures per hour": lambda s, c: s.stats.activity(
        c, NOW - timedelta(days=1), timedelta(hours=1), 24
    ),
}


@pytest.mark.parametrize("name", sorted(LOOK_UPS))
def test_store_look_ups_read_small_indexes(sqlite_store: Store, name: str) -> None:
    with captured(sqlite_store) as statements:
        LOOK_UPS[name](sqlite_store)
    assert statements
    assert full_scans(sqlite_store, statements) == []


@pytest.mark.parametrize("name", sorted(READS))
def test_status_figures_read_small_indexes(sqlite_store: Store, name: str) -> None:
    with captured(sqlite_store) as statements, sqlite_store.reading() as connection:
        READS[name](sqlite_store, connection)
    assert statements
    assert full_scans(sqlite_store, statements) == []


def test_the_check_catches_a_bound_status(sqlite_store: Store) -> None:
    """The check itself: the look-up as it was before the constants were written in."""
    query = sa.text("SELECT id FROM hookinbox_events WHERE status IN (?, ?) LIMIT 1")
    with captured(sqlite_store) as statements, sqlite_store.engine.connect() as connection:
        connection.exec_driver_sql(str(query), ("pending", "deferred"))
    assert len(full_scans(sqlite_store, statements)) == 1
