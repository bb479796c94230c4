"""Schema 9's copy of the open events, made in short transactions before the step while the
processes of schema 8 keep writing (issue 45; `_storage/_queue_copy.py`).

What it proves, on SQLite, PostgreSQL and MariaDB:
- whatever the older processes do between the copy's batches (lease, claim, release, fail,
  replay, delete, store new events), on events already copied or not yet, the upgrade queues
  exactly the open events, each as it now is, and leaves no tombstone and no mirroring
  trigger behind (the new version's claim then writes no queue row);
- an event closed, or opened again, by a transaction still uncommitted while a batch reads
  it ends up as that transaction left it: the batch never brings back what was closed;
- a copy stopped midway resumes where it stopped, in a process of its own;
- (PostgreSQL) a long transaction of an older worker on the events table holds no delivery
  behind the upgrade's locks for longer than a fraction of a second.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from hookinbox._model import Status
from hookinbox._storage import LATEST_VERSION, Store
from hookinbox._storage._queue_copy import TOMBSTONE, copy_batch, prepare
from hookinbox._storage._schema import event_queue, events
from tests.storage._old_events import EVENTS_13
from tests.storage._schema_8 import at_schema_8, queue_mismatches
from tests.storage.test_schema_9 import NOW, OLD_CLAIM, OLD_TOKEN, _event

# Schema 8's statements for one event, as its worker, its replay and its pruner wrote them.
OLD_LEASE_ONE = sa.text(
    "UPDATE hookinbox_events SET status = 'processing', attempts = attempts + 1,"
    " lease_token = :token, lease_expires_at = :until WHERE event_id = :event_id"
)
OLD_RELEASE = sa.text(
    "UPDATE hookinbox_events SET status = :status, next_attempt_at = :at,"
    " lease_token = NULL, lease_expires_at = NULL WHERE event_id = :event_id"
)
OLD_REPLAY = sa.text(
    "UPDATE hookinbox_events SET status = 'pending', outcome = NULL, next_attempt_at = :at"
    " WHERE event_id = :event_id"
)
OLD_DELETE = sa.text("DELETE FROM hookinbox_events WHERE event_id = :event_id")


def _inbox(url: str, count: int = 12) -> Store:
    """Schema 8 with `count` events, ids 1 to `count` in order: every third done, the rest
    pending."""
    store = at_schema_8(url)
    rows = [
        _event(f"evt_{n:02}", "processed" if n % 3 == 0 else "pending",
               outcome="handled" if n % 3 == 0 else None)
        for n in range(1, count + 1)
    ]  # fmt: skip
    with store.engine.begin() as connection:
        connection.execute(EVENTS_13.insert(), rows)
    return store


def _state(store: Store, event_id: str) -> tuple[str, int] | None:
    query = (
        sa.select(event_queue.c.state, event_queue.c.attempts)
        .join_from(event_queue, events, events.c.id == event_queue.c.id)
        .where(events.c.event_id == event_id)
    )
    with store.engine.connect() as connection:
        row = connection.execute(query).first()
    return None if row is None else (row[0], row[1])


def _run(store: Store, statement: sa.TextClause, **values: object) -> None:
    with store.engine.begin() as connection:
        assert connection.execute(statement, values).rowcount == 1


def test_what_older_processes_write_between_batches_is_queued_as_it_ends(
    empty_db_url: str,
) -> None:
    store = _inbox(empty_db_url)
    later = NOW + timedelta(hours=1)
    with store.engine.connect() as connection:
        assert prepare(connection)
        assert copy_batch(connection, 5) == (5, 12)  # evt_01 to evt_05 copied, the rest not
    # Schema 8's processes go on, on events copied and not yet copied alike.
    until = NOW + timedelta(minutes=5)
    for event_id in ("evt_01", "evt_07"):  # leased, then claimed: done
        _run(store, OLD_LEASE_ONE, event_id=event_id, token=OLD_TOKEN, until=until)
        _run(store, OLD_CLAIM, event_id=event_id, token=OLD_TOKEN)
    for event_id in ("evt_02", "evt_08"):  # leased and still held
        _run(store, OLD_LEASE_ONE, event_id=event_id, token=OLD_TOKEN, until=until)
    _run(store, OLD_RELEASE, event_id="evt_04", status="deferred", at=later)
    _run(store, OLD_RELEASE, event_id="evt_10", status="failed", at=later)
    _run(store, OLD_REPLAY, event_id="evt_03", at=NOW)  # processed, then replayed
    _run(store, OLD_REPLAY, event_id="evt_09", at=NOW)
    _run(store, OLD_DELETE, event_id="evt_05")  # open, deleted
    _run(store, OLD_DELETE, event_id="evt_11")
    with store.engine.begin() as connection:  # the older ingest stores more
        connection.execute(
            EVENTS_13.insert(), [_event("evt_13", "pending"), _event("evt_14", "processed")]
        )
    with store.engine.connect() as connection:
        assert copy_batch(connection, 3) == (8, 14)
    _run(store, OLD_CLAIM, event_id="evt_08", token=OLD_TOKEN)  # a held one claimed, copied
    assert store.migrate() == (8, LATEST_VERSION)

    assert queue_mismatches(store) == {"missing": 0, "extra": 0, "wrong_state": 0, "queued": 6}
    assert _state(store, "evt_01") is None and _state(store, "evt_07") is None
    assert _state(store, "evt_02") == ("pending", 1)  # held at the upgrade: due again at once
    assert _state(store, "evt_04") == ("deferred", 0)
    assert _state(store, "evt_10") == ("failed", 0)
    assert _state(store, "evt_03") == ("pending", 0) and _state(store, "evt_09") == ("pending", 0)
    assert _state(store, "evt_05") is None and _state(store, "evt_11") is None
    assert _state(store, "evt_13") == ("pending", 0) and _state(store, "evt_14") is None
    assert _state(store, "evt_08") is None

    # No mirroring trigger is left: the new version's claim deletes the row, nothing more.
    lease = store.events.lease(limit=20, now=NOW + timedelta(hours=2), until=until)
    for item in lease.fresh:
        with store.transaction() as connection:
            assert store.events.claim(connection, item, Status.PROCESSED, NOW, "handled")
    with store.engine.connect() as connection:
        left = connection.execute(sa.select(event_queue.c.state)).scalars().all()
    assert left == ["failed"]  # evt_10's; no tombstone (`done`)
    assert TOMBSTONE not in left
    store.dispose()


def test_an_event_changed_by_a_transaction_open_while_a_batch_reads_it_ends_as_left(
    empty_db_url: str,
) -> None:
    """The batch reads evt_01 open and evt_03 done, as they were before a worker's claim and
    an operator's replay that have not committed yet: the claimed one is not brought back
    (its tombstone, written by the claim, stops the batch's insert), the replayed one is
    queued (by the replay)."""
    store = _inbox(empty_db_url, count=4)
    until = NOW + timedelta(minutes=5)
    _run(store, OLD_LEASE_ONE, event_id="evt_01", token=OLD_TOKEN, until=until)
    with store.engine.connect() as connection:
        assert prepare(connection)  # from here on, evt_01's queue row follows its changes
    spans: list[tuple[int, int] | None] = []
    with store.engine.connect() as writer:
        with writer.begin():
            writer.execute(OLD_CLAIM, {"event_id": "evt_01", "token": OLD_TOKEN})
            writer.execute(OLD_REPLAY, {"event_id": "evt_03", "at": NOW})

            def batch() -> None:
                with store.engine.connect() as connection:
                    spans.append(copy_batch(connection, 100))

            copier = threading.Thread(target=batch)
            copier.start()
            time.sleep(0.5)  # the batch has begun (and waits, where the database makes it)
        copier.join(timeout=30)
    assert spans == [(4, 4)]
    assert store.migrate() == (8, LATEST_VERSION)
    assert _state(store, "evt_01") is None
    assert _state(store, "evt_03") == ("pending", 0)
    assert queue_mismatches(store) == {"missing": 0, "extra": 0, "wrong_state": 0, "queued": 3}
    store.dispose()


def test_a_copy_stopped_midway_resumes_where_it_stopped(empty_db_url: str) -> None:
    store = _inbox(empty_db_url)
    with store.engine.connect() as connection:
        assert prepare(connection)
        assert copy_batch(connection, 4) == (4, 12)
    store.dispose()
    again = Store(empty_db_url, auto_migrate=False)  # another process, later
    with again.engine.connect() as connection:
        assert prepare(connection)  # finds the table and its triggers, keeps the position
        assert copy_batch(connection, 4) == (8, 12)
        assert copy_batch(connection, 100) == (12, 12)
        assert copy_batch(connection, 100) is None
    assert again.migrate() == (8, LATEST_VERSION)
    assert queue_mismatches(again) == {"missing": 0, "extra": 0, "wrong_state": 0, "queued": 8}
    with again.engine.connect() as connection:
        assert not prepare(connection)  # schema 9 applied: nothing to copy any more
        assert copy_batch(connection, 100) is None
    again.dispose()


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_long_transaction_on_the_events_holds_no_delivery_behind_the_upgrade(
    empty_db_url: str,
) -> None:
    """A worker of schema 8 holds the events table (its claim is written, its handler runs)
    for 2.5 s while the upgrade needs the table's strongest lock: deliveries stored meanwhile
    wait a fraction of a second, not until the handler ends (PostgreSQL queues every later
    lock behind a waiting one)."""
    store = _inbox(empty_db_url)
    until = NOW + timedelta(minutes=5)
    _run(store, OLD_LEASE_ONE, event_id="evt_01", token=OLD_TOKEN, until=until)
    claimed = threading.Event()

    def handler() -> None:  # schema 8's processing transaction: the claim, then the handler
        with store.engine.connect() as connection, connection.begin():
            connection.execute(OLD_CLAIM, {"event_id": "evt_01", "token": OLD_TOKEN})
            claimed.set()
            time.sleep(2.5)

    holder = threading.Thread(target=handler)
    holder.start()
    assert claimed.wait(timeout=30)
    results: list[tuple[int, int]] = []
    # To schema 13: schema 8's inserts below fail once schema 14 drops the events' bodies.
    upgrade = threading.Thread(target=lambda: results.append(store.migrate(13)))
    upgrade.start()
    latencies: list[float] = []
    for number in range(60):  # schema 8's ingest, every 50 ms for 3 s
        started = time.monotonic()
        with store.engine.begin() as connection:
            connection.execute(EVENTS_13.insert(), [_event(f"evt_new_{number}", "pending")])
        latencies.append(time.monotonic() - started)
        time.sleep(max(0.0, 0.05 - latencies[-1]))
    holder.join(timeout=60)
    upgrade.join(timeout=60)
    assert results == [(8, 13)]
    print(f"slowest of {len(latencies)} deliveries: {max(latencies):.3f} s")
    assert max(latencies) < 1.0, f"slowest delivery {max(latencies):.2f} s"
    assert _state(store, "evt_01") is None  # the claim committed before the step: done
    assert queue_mismatches(store) == {"missing": 0, "extra": 0, "wrong_state": 0, "queued": 67}
    store.dispose()
