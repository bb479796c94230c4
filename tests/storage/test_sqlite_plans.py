"""Every status look-up on SQLite reads a partial index, never the whole table.

SQLite uses a partial index only when it can prove while planning that the query's WHERE
implies the index's, and it proves that from constants and repeated terms only: a bound
`status IN (?, ?)` or a bare `status = 'failed'` (for an index on the statuses that are not
done) proves nothing, and the look-up scans every row ever received (bench/README.md: the
worker drained 4 events/s at a million rows). Each statement below is captured as hookinbox
issues it and planned again with `EXPLAIN QUERY PLAN`.
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
from hookinbox._storage import (
    EventFilter,
    Release,
    Store,
    activity,
    count_events,
    has_due,
    has_message_due,
    lease_due,
    lease_messages,
    list_events,
    next_due_at,
    next_message_due_at,
    open_figures,
    outbox_backlog,
    sweep_expired,
    sweep_messages,
)
from hookinbox._storage._stats import waiting_count

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


def decide_event(_event: Any) -> Release:
    return Release(Status.PENDING, NOW, "lost")


def decide_message(_message: Any) -> Any:
    raise AssertionError("nothing is leased, so nothing is swept")


LOOK_UPS: dict[str, Callable[[Store], object]] = {
    "worker: is anything due": lambda s: has_due(s, NOW),
    "worker: when is the next retry": next_due_at,
    "worker: lease": lambda s: lease_due(s, limit=4, now=NOW, lease_until=NOW),
    "worker: sweep": lambda s: sweep_expired(s, now=NOW, decide=decide_event),
    "relay: is anything due": lambda s: has_message_due(s, NOW),
    "relay: when is the next retry": next_message_due_at,
    "relay: lease": lambda s: lease_messages(s, limit=4, now=NOW, lease_until=NOW),
    "relay: sweep": lambda s: sweep_messages(s, now=NOW, decide=decide_message),
    **{
        f"operator: events --status {status.value}": (
            lambda s, status=status: list_events(s, EventFilter(status=status), 50)
        )
        for status in (Status.FAILED, Status.DEFERRED, Status.PENDING, Status.PROCESSING)
    },
    "operator: count of failed": lambda s: count_events(s, EventFilter(status=Status.FAILED)),
}
READS: dict[str, Callable[[sa.Connection], object]] = {
    "status: open figures": lambda c: open_figures(c, NOW),
    "status: waiting": waiting_count,
    "status: outbox backlog": outbox_backlog,
    "dashboard: failures per hour": lambda c: activity(
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
        READS[name](connection)
    assert statements
    assert full_scans(sqlite_store, statements) == []


def test_the_check_catches_a_bound_status(sqlite_store: Store) -> None:
    """The check itself: the look-up as it was before the constants were written in."""
    query = sa.text("SELECT id FROM hookinbox_events WHERE status IN (?, ?) LIMIT 1")
    with captured(sqlite_store) as statements, sqlite_store.engine.connect() as connection:
        connection.exec_driver_sql(str(query), ("pending", "deferred"))
    assert len(full_scans(sqlite_store, statements)) == 1
