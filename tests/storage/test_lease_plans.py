"""A lease reads its first due rows and stops, however long the backlog behind them.

The lease picks due rows `ORDER BY next_attempt_at, id LIMIT n`. With the due index keyed on
`next_attempt_at` alone, PostgreSQL fetched every due row and sorted them for each lease:
19 ms per lease behind 5,000 due events on a 10-million-row inbox, growing with the backlog,
so a backlog drained in quadratic time (bench/README.md, growth). The index is now keyed as
the lease reads, `(next_attempt_at, id)` (schema 8). Each lease statement is captured as the
worker issues it and run again under `EXPLAIN ANALYZE`, after `ANALYZE` as autovacuum would
have run it: the due index is scanned in order and yields a few rows, not the backlog.

The claim that follows a lease finds its rows by primary key (the queue row it deletes, the
event it ends). Planned from statistics taken while nothing was leased, it once read the whole
leased or open index instead, filtered by id.

Since schema 9 the events' lease reads the queue's due index (`hookinbox_event_queue`), and
its leased rows stay at the head of that index: a lease steps over them, a few at most.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from hookinbox._model import NewDelivery, Status
from hookinbox._storage import Store
from hookinbox._storage._schema import outbox

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
BACKLOG = 3_000
LIMIT = 10


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


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from nodes(child)


def due_index_scans(plan: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [node for node in nodes(plan) if node.get("Index Name", "").startswith(prefix)]


def lease_plan(store: Store, statements: list[tuple[str, Any]], table: str) -> dict[str, Any]:
    """The plan of the statement that updates (or deletes from) `table`, as it ran (in a
    transaction rolled back: nothing changes)."""
    (statement, parameters) = next(
        (s, p) for s, p in statements if f"UPDATE {table}" in s or f"DELETE FROM {table}" in s
    )
    with store.engine.connect() as connection:
        explained = connection.exec_driver_sql(
            f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}", parameters
        ).scalar_one()
        connection.rollback()
    document = explained if isinstance(explained, list) else json.loads(explained)
    plan: dict[str, Any] = document[0]["Plan"]
    return plan


def add_due_events(store: Store, count: int, at: datetime) -> None:
    """`count` pending events, all due at the same instant (a burst, or a batched delivery)."""
    deliveries = [
        NewDelivery(
            source="stripe",
            event_id=f"evt_{n:06d}",
            event_type="charge.succeeded",
            occurred_at=at,
            received_at=at,
            body=b"{}",
            headers={},
            body_sha256=hashlib.sha256(b"{}").hexdigest(),
        )
        for n in range(count)
    ]
    with store.transaction() as connection:
        store.ingest.record_batch(connection, deliveries)


def add_due_messages(store: Store, count: int, at: datetime) -> None:
    rows = [
        {
            "destination": "erp",
            "message_key": f"m-{n:06d}",
            "payload": "{}",
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
        }
        for n in range(count)
    ]
    with store.transaction() as connection:
        connection.execute(outbox.insert(), rows)


def analyze(store: Store) -> None:
    with store.engine.connect() as connection:
        connection.exec_driver_sql("ANALYZE")
        connection.commit()


@pytest.mark.parametrize("backend", ["postgres"])
def test_an_event_lease_reads_its_first_rows_not_the_backlog(store: Store) -> None:
    add_due_events(store, BACKLOG, NOW - timedelta(minutes=1))
    analyze(store)
    with captured(store) as statements:
        leased = store.events.lease(limit=LIMIT, now=NOW, until=NOW + timedelta(minutes=5)).fresh
    assert [lease.event.id for lease in leased] == [f"evt_{n:06d}" for n in range(LIMIT)]

    plan = lease_plan(store, statements, "hookinbox_event_queue")
    scans = due_index_scans(plan, "ix_hookinbox_event_queue_due")
    assert scans, f"the lease does not read the due index: {json.dumps(plan)[:2000]}"
    assert not [node for node in nodes(plan) if node["Node Type"] == "Sort"]
    # The rows already leased above are skipped (locked or no longer due), the next LIMIT
    # taken: a few dozen index entries at most, never the BACKLOG.
    assert scans[0]["Actual Rows"] <= 4 * LIMIT


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_message_lease_reads_its_first_rows_not_the_backlog(store: Store) -> None:
    add_due_messages(store, BACKLOG, NOW - timedelta(minutes=1))
    analyze(store)
    with captured(store) as statements:
        until = NOW + timedelta(minutes=5)
        leased = store.messages.lease(limit=LIMIT, now=NOW, until=until).fresh
    assert [lease.message.key for lease in leased] == [f"m-{n:06d}" for n in range(LIMIT)]

    plan = lease_plan(store, statements, "hookinbox_outbox")
    scans = due_index_scans(plan, "ix_hookinbox_outbox_queue_due")
    assert scans, f"the lease does not read the due index: {json.dumps(plan)[:2000]}"
    assert not [node for node in nodes(plan) if node["Node Type"] == "Sort"]
    assert scans[0]["Actual Rows"] <= 4 * LIMIT


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_claim_finds_its_row_by_primary_key_however_many_are_leased(store: Store) -> None:
    """The claim (and every write conditional on a lease) reads one row of each table, found
    by primary key, however many rows are leased: the statistics, taken while nothing was
    leased, must not send it through another index."""
    add_due_events(store, BACKLOG, NOW - timedelta(minutes=1))
    analyze(store)  # as autovacuum would: nothing is leased yet
    until = NOW + timedelta(minutes=5)
    leased = store.events.lease(limit=BACKLOG, now=NOW, until=until).fresh
    with captured(store) as statements, store.transaction() as connection:
        assert store.events.claim(connection, leased[-1], Status.PROCESSED, NOW, "handled")

    plan = lease_plan(store, statements, "hookinbox_event_queue")
    # The scans of tables (the CTE's scan reads the deleted row, and is no table's).
    tables = [
        node for node in nodes(plan) if "Relation Name" in node and "Scan" in node["Node Type"]
    ]
    names = sorted(node.get("Index Name", node["Node Type"]) for node in tables)
    assert names == ["hookinbox_event_queue_pkey", "hookinbox_events_pkey"], tables
    assert all(node["Actual Rows"] <= 1 for node in tables)


def sqlite_plan(store: Store, statement: str, parameters: Any) -> list[str]:
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        return [row[-1] for row in rows]


@pytest.mark.parametrize("backend", ["sqlite"])
@pytest.mark.parametrize(
    ("queue", "due_index"),
    [("events", "ix_hookinbox_event_queue_due"), ("messages", "ix_hookinbox_outbox_queue_due")],
)
def test_a_sqlite_lease_is_one_read_in_the_due_index_and_one_write(
    store: Store, queue: str, due_index: str
) -> None:
    """SQLite holds its write lock for the whole lease, so the lease reads the due rows with
    their items and then writes the lease: two statements (three before, the worker's drain
    rate is made of them), the read in the due index's order (no sort of the backlog) and the
    items found by primary key. Without statistics, as most SQLite inboxes are (nothing runs
    ANALYZE): SQLite then preferred the open rows' index by state and sorted the backlog for
    every lease (3.6 ms a lease behind 6,000 events, the drain 30-40 % slower than schema 8)."""
    add_due_events(store, BACKLOG, NOW - timedelta(minutes=1))
    add_due_messages(store, BACKLOG, NOW - timedelta(minutes=1))
    leases = store.events if queue == "events" else store.messages
    with captured(store) as statements:
        leased = leases.lease(limit=LIMIT, now=NOW, until=NOW + timedelta(minutes=5)).fresh
    assert len(leased) == LIMIT
    verbs = [s.split()[0].upper() for s, _ in statements if not s.startswith("PRAGMA")]
    assert [v for v in verbs if v != "BEGIN"] == ["SELECT", "UPDATE"], verbs
    read = next((s, p) for s, p in statements if s.lstrip().upper().startswith("SELECT"))
    if queue == "events":  # whether any source is paused: in the read, no statement more
        assert "hookinbox_paused_sources" in read[0], read[0]
    plan = sqlite_plan(store, *read)
    assert any(due_index in step for step in plan), plan
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    items_table = "hookinbox_events" if queue == "events" else "hookinbox_outbox"
    assert any(f"{items_table} USING INTEGER PRIMARY KEY" in step for step in plan), plan
    # What was written is what the worker was told: its token on those rows, one attempt each.
    table = "hookinbox_event_queue" if queue == "events" else "hookinbox_outbox_queue"
    with store.engine.connect() as connection:
        written = connection.exec_driver_sql(
            f"SELECT id, attempts FROM {table} WHERE lease_token IS NOT NULL ORDER BY id"
        ).all()
    items = [x.event if queue == "events" else x.message for x in leased]
    assert [(row.id, row.attempts) for row in written] == [(x.row_id, 1) for x in items]
    assert [x.attempts for x in items] == [1] * LIMIT
