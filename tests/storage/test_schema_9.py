"""Schema 9: unfinished work in `hookinbox_event_queue`, beside the events (issue 37).

What it proves, on SQLite and PostgreSQL:
- upgrading a filled inbox keeps every event where it was: each open event (pending, deferred,
  failed, stale, and one a worker held, mid-attempt) gets its queue row, done ones none; the
  held one is due again at once, and its worker's claim (schema 8's statement) matches
  nothing, so it runs once, by the new worker;
- processes of the older version fail closed afterwards: their leases (of events, and of
  outbox messages) are refused by a trigger, and an event their ingest inserts is queued all
  the same (a trigger on insert makes every queue row), so nothing is lost or run twice;
- no index of `hookinbox_events` covers a column that processing an event updates: the
  condition for PostgreSQL to keep those updates heap-only.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox._model import Status
from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._schema import event_queue, events, outbox
from tests.storage._old_events import EVENTS_13, live

NOW = datetime.now(UTC).replace(microsecond=0)
OLD_TOKEN = "0" * 32


def _event(event_id: str, status: str, **values: object) -> dict[str, object]:
    body = f'{{"id": "{event_id}"}}'.encode()
    row: dict[str, object] = {
        "source": "stripe",
        "event_id": event_id,
        "event_type": "charge.succeeded",
        "occurred_at": NOW,
        "received_at": NOW - timedelta(minutes=5),
        "body": body,
        "headers": "{}",
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "status": status,
        "attempts": 0,
        "next_attempt_at": NOW - timedelta(minutes=5),
        "deferrals": 0,
        "delivery_count": 1,
        "key_conflicts": 0,
        "last_delivery_at": NOW - timedelta(minutes=5),
        # Every row names every column: an executemany takes its columns from the first row.
        "outcome": None,
        "lease_token": None,
        "lease_expires_at": None,
    }
    return {**row, **values}


def _message(key: str, status: str, **values: object) -> dict[str, object]:
    row: dict[str, object] = {
        "destination": "erp",
        "message_key": key,
        "payload": "{}",
        "status": status,
        "attempts": 0,
        "next_attempt_at": NOW - timedelta(minutes=1),
        "created_at": NOW - timedelta(minutes=1),
        "lease_token": None,
        "lease_expires_at": None,
    }
    return {**row, **values}


# Schema 8's own statements, as a process of that version still running would issue them.
OLD_LEASE = sa.text(
    "UPDATE hookinbox_events SET status = 'processing', attempts = attempts + 1,"
    " lease_token = :token, lease_expires_at = :until"
    " WHERE status IN ('pending', 'deferred') AND next_attempt_at <= :now"
)
OLD_CLAIM = sa.text(
    "UPDATE hookinbox_events SET status = 'processed', outcome = 'handled',"
    " lease_token = NULL, lease_expires_at = NULL"
    " WHERE event_id = :event_id AND lease_token = :token AND status = 'processing'"
)
OLD_RELAY_LEASE = sa.text(
    "UPDATE hookinbox_outbox SET status = 'delivering', lease_token = :token"
    " WHERE status = 'pending'"
)


def _old_schema_inbox(url: str) -> Store:
    """An inbox at schema 8 with events in every status, one held by a worker mid-attempt,
    and outbox messages (one a relay holds)."""
    store = Store(url)
    from hookinbox._storage import _migrations

    _migrations.migrate(store.engine, target=8)
    held = {"lease_token": OLD_TOKEN, "lease_expires_at": NOW + timedelta(minutes=1)}
    rows = [
        _event("evt_pending", "pending"),
        _event("evt_deferred", "deferred", next_attempt_at=NOW + timedelta(hours=1), deferrals=2),
        _event("evt_held", "processing", attempts=1, **held),
        _event("evt_failed", "failed", attempts=5, outcome="max_attempts"),
        _event("evt_stale", "stale"),
        _event("evt_processed", "processed", attempts=1, outcome="handled"),
        _event("evt_unhandled", "unhandled", attempts=1, outcome="no_handler"),
    ]
    messages = [
        _message("m_pending", "pending"),
        _message("m_held", "delivering", attempts=1, **held),
        _message("m_delivered", "delivered", attempts=1),
    ]
    with store.engine.begin() as connection:
        connection.execute(EVENTS_13.insert(), rows)
        connection.execute(outbox.insert(), messages)
    return store


def _queue(store: Store) -> dict[str, tuple[str, int, str | None]]:
    query = sa.select(
        events.c.event_id, event_queue.c.state, event_queue.c.attempts, event_queue.c.lease_token
    ).join_from(event_queue, events, events.c.id == event_queue.c.id)
    with store.engine.connect() as connection:
        return {row[0]: (row[1], row[2], row[3]) for row in connection.execute(query)}


def test_upgrading_a_filled_inbox_queues_its_open_events(empty_db_url: str) -> None:
    store = _old_schema_inbox(empty_db_url)
    assert store.migrate() == (8, LATEST_VERSION)
    assert _queue(store) == {
        "evt_pending": ("pending", 0, None),
        "evt_deferred": ("deferred", 0, None),
        "evt_held": ("pending", 1, None),  # due again at once: its worker cannot claim it
        "evt_failed": ("failed", 5, None),
        "evt_stale": ("stale", 0, None),
    }
    held = store.get_event("stripe", "evt_held")
    assert held is not None and (held.status, held.attempts) == (Status.PENDING, 1)
    deferred = store.get_event("stripe", "evt_deferred")
    assert deferred is not None and deferred.next_attempt_at > NOW  # its schedule kept
    with store.engine.connect() as connection:
        messages = dict(connection.execute(sa.select(outbox.c.message_key, outbox.c.status)).all())
    assert messages == {"m_pending": "pending", "m_held": "pending", "m_delivered": "delivered"}
    with store.engine.connect() as connection:
        token = connection.execute(
            sa.select(outbox.c.lease_token).where(outbox.c.message_key == "m_held")
        ).scalar()
    assert token == OLD_TOKEN  # still held by its relay until its lease runs out: no resend
    store.dispose()


def test_the_event_a_worker_held_runs_once_after_the_upgrade(empty_db_url: str) -> None:
    store = _old_schema_inbox(empty_db_url)
    store.migrate()
    # The old worker comes back from its handler and claims: schema 9 cleared its lease.
    with store.engine.begin() as connection:
        claimed = connection.execute(OLD_CLAIM, {"event_id": "evt_held", "token": OLD_TOKEN})
    assert claimed.rowcount == 0
    lease = store.events.lease(limit=10, now=NOW, until=NOW + timedelta(minutes=1))
    assert sorted(item.event.id for item in lease.fresh) == ["evt_held", "evt_pending"]
    assert lease.expired == []
    for item in lease.fresh:
        with store.transaction() as connection:
            assert store.events.claim(connection, item, Status.PROCESSED, NOW, "handled")
    held = store.get_event("stripe", "evt_held")
    assert held is not None and (held.status, held.attempts) == (Status.PROCESSED, 2)
    assert set(_queue(store)) == {"evt_deferred", "evt_failed", "evt_stale"}
    store.dispose()


def test_older_processes_fail_closed_after_the_upgrade(empty_db_url: str) -> None:
    store = _old_schema_inbox(empty_db_url)
    store.migrate(13)  # the last schema that a process of schema 8 can still insert into
    until = NOW + timedelta(minutes=1)
    with pytest.raises(sa.exc.DBAPIError, match="older hookinbox"):
        with store.engine.begin() as connection:
            connection.execute(OLD_LEASE, {"token": "1" * 32, "until": until, "now": NOW})
    with pytest.raises(sa.exc.DBAPIError, match="older hookinbox"):
        with store.engine.begin() as connection:
            connection.execute(OLD_RELAY_LEASE, {"token": "1" * 32})
    # The old ingest's insert (schema 8's columns, status pending) is queued by the trigger.
    with store.engine.begin() as connection:
        connection.execute(EVENTS_13.insert(), [_event("evt_from_old_ingest", "pending")])
    assert _queue(store)["evt_from_old_ingest"] == ("pending", 0, None)
    store.dispose()


def test_a_new_event_is_queued_with_its_insert(store: Store) -> None:
    with store.engine.begin() as connection:
        connection.execute(
            events.insert(), [live(_event("evt_a", "pending")), live(_event("evt_b", "stale"))]
        )
        connection.execute(events.insert(), [live(_event("evt_c", "processed", attempts=1))])
    assert _queue(store) == {"evt_a": ("pending", 0, None), "evt_b": ("stale", 0, None)}


# Every column an event's processing writes to `hookinbox_events`: the claim, a release, a
# deferral, the inline mark (`_storage/_queue.py`, `EventQueue`).
WRITTEN_BY_PROCESSING = frozenset(
    {
        "status", "processed_at", "outcome", "last_error", "deferred_since", "deferrals",
        "attempts", "next_attempt_at", "lease_token", "lease_expires_at",
    }
)  # fmt: skip


def test_no_index_of_the_events_covers_what_processing_writes(store: Store) -> None:
    """PostgreSQL makes an update heap-only only when no indexed column (nor a column in an
    index's WHERE) changes: none of those may be indexed on the big table."""
    covered = indexed_columns(store, events)
    assert covered & WRITTEN_BY_PROCESSING == set()
    assert covered >= {"received_at", "source", "event_id"}  # the checker reads indexes


def indexed_columns(store: Store, table: sa.Table) -> set[str]:
    """The columns of `table` that an index or a unique constraint covers, or names in its
    WHERE: an update of any of them cannot be heap-only on PostgreSQL."""
    inspector = sa.inspect(store.engine)
    covered: set[str] = set()
    for index in inspector.get_indexes(table.name):
        covered |= {c for c in index["column_names"] if c}
        where = str(index.get("dialect_options", {}).get(f"{store.dialect.name}_where") or "")
        covered |= {c.name for c in table.c if c.name in where}
    for constraint in inspector.get_unique_constraints(table.name):
        covered |= set(constraint["column_names"])
    return covered
