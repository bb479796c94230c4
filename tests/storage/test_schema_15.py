"""Schema 15: the relay's unfinished work in `hookinbox_outbox_queue`, beside the outbox.

What it proves:
- upgrading a filled outbox keeps every message where it was: each message not delivered
  (pending, one a relay holds, failed) gets its queue row, with its attempts, its schedule and
  the relay's lease; delivered ones none; the backlog reads the same before and after;
- an older relay fails closed afterwards (its lease is refused by a trigger), and a message an
  older handler inserts is queued all the same, so nothing is lost or sent by two relays;
- no index of `hookinbox_outbox` covers a column the relay writes (the condition for
  PostgreSQL to keep those updates heap-only), and on PostgreSQL a relay process draining a
  backlog makes at least 90 % of the outbox's and of its queue's updates heap-only.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox._storage import LATEST_VERSION, Store, _migrations
from hookinbox._storage._schema import outbox, outbox_queue
from tests.outbox.test_relay_processes import queue_messages, statuses
from tests.storage.test_heap_only import _updates as updates_of
from tests.storage.test_schema_9 import _message as schema_9_message
from tests.storage.test_schema_9 import indexed_columns
from tests.support.receiver import running_receiver
from tests.support.workers import Workers, wait_for

NOW = datetime.now(UTC).replace(microsecond=0)
OLD_TOKEN = "0" * 32


def _message(key: str, status: str, **values: object) -> dict[str, object]:
    # Every row names every column: an executemany takes its columns from the first row.
    return schema_9_message(key, status, **{"ordering_key": None, "last_error": None, **values})


# Schema 13's relay lease, as a relay of that version still running would write it.
OLD_RELAY_LEASE = sa.text(
    "UPDATE hookinbox_outbox SET lease_token = :token, attempts = attempts + 1"
    " WHERE status = 'pending' AND lease_token IS NULL"
)


def _schema_13_outbox(url: str) -> Store:
    store = Store(url)
    _migrations.migrate(store.engine, target=13)
    held = {"lease_token": OLD_TOKEN, "lease_expires_at": NOW + timedelta(minutes=1)}
    later = NOW + timedelta(hours=1)
    messages = [
        _message("m_pending", "pending", ordering_key="order-1"),
        _message("m_later", "pending", attempts=2, next_attempt_at=later, last_error="503"),
        _message("m_held", "pending", attempts=1, **held),
        _message("m_failed", "failed", attempts=10, last_error="410"),
        _message("m_delivered", "delivered", attempts=1),
    ]
    with store.engine.begin() as connection:
        connection.execute(outbox.insert(), messages)
    return store


def _queue(store: Store) -> dict[str, tuple[str, int, datetime, str | None, str | None]]:
    q = outbox_queue.c
    query = sa.select(
        outbox.c.message_key, q.state, q.attempts, q.next_attempt_at, q.lease_token, q.ordering_key
    ).join_from(outbox_queue, outbox, outbox.c.id == q.id)
    with store.engine.connect() as connection:
        return {row[0]: tuple(row[1:]) for row in connection.execute(query)}  # type: ignore[misc]


def _backlog(store: Store) -> dict[str, int]:
    with store.engine.connect() as connection:
        return store.outbox.backlog(connection)


def test_upgrading_a_filled_outbox_queues_its_open_messages(empty_db_url: str) -> None:
    store = _schema_13_outbox(empty_db_url)
    assert store.migrate() == (13, LATEST_VERSION)
    queued = _queue(store)
    assert {key: row[:2] for key, row in queued.items()} == {
        "m_pending": ("pending", 0),
        "m_later": ("pending", 2),
        "m_held": ("pending", 1),
        "m_failed": ("failed", 10),
    }
    assert queued["m_later"][2] == NOW + timedelta(hours=1)  # its schedule kept
    assert queued["m_held"][3] == OLD_TOKEN  # still its relay's until the lease runs out
    assert queued["m_pending"][4] == "order-1"
    assert _backlog(store) == {"pending": 2, "delivering": 1, "failed": 1}
    # Due now: the pending one only (the other waits, the held one is held, the failed one done).
    lease = store.messages.lease(limit=10, now=NOW, until=NOW + timedelta(minutes=1))
    assert [item.message.key for item in lease.fresh] == ["m_pending"]
    store.dispose()


def test_an_older_relay_fails_closed_and_an_older_handler_is_queued(empty_db_url: str) -> None:
    store = _schema_13_outbox(empty_db_url)
    store.migrate()
    with pytest.raises(sa.exc.DBAPIError, match="older hookinbox"):
        with store.engine.begin() as connection:
            connection.execute(OLD_RELAY_LEASE, {"token": "1" * 32})
    # Schema 13's enqueue (its columns, status pending) gets its queue row from the trigger.
    with store.engine.begin() as connection:
        connection.execute(outbox.insert(), [_message("m_from_old_handler", "pending")])
    assert _queue(store)["m_from_old_handler"][:2] == ("pending", 0)
    lease = store.messages.lease(limit=10, now=NOW, until=NOW + timedelta(minutes=1))
    assert "m_from_old_handler" in {item.message.key for item in lease.fresh}
    store.dispose()


# Every column the relay writes to `hookinbox_outbox` (`MessageQueue.record`, `Queue.finish`
# and `Queue.settle` of a separate queue).
WRITTEN_BY_THE_RELAY = frozenset(
    {"status", "attempts", "delivered_at", "last_error", "next_attempt_at", "lease_token",
     "lease_expires_at"}
)  # fmt: skip


def test_no_index_of_the_outbox_covers_what_the_relay_writes(store: Store) -> None:
    covered = indexed_columns(store, outbox)
    assert covered & WRITTEN_BY_THE_RELAY == set()
    assert covered >= {"destination", "message_key", "created_at"}


def _updates(store: Store) -> dict[str, tuple[int, int]]:
    return updates_of(store, ("hookinbox_outbox", "hookinbox_outbox_queue"))


MESSAGES = 600


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgres"])
def test_a_relay_drain_stays_heap_only(db_url: str) -> None:
    """A relay process delivers a backlog of messages: at least 90 % of the row updates of
    the outbox and of its queue are heap-only (schema 13: 45 % of the outbox's)."""
    with running_receiver(lambda _key, _attempt: "ok") as receiver:
        queue_messages(db_url, receiver.url, MESSAGES)
        store = Store(db_url)
        before = _updates(store)
        env = {"OUTBOX_TARGET": receiver.url}
        with Workers(db_url, env=env, command="relay", app="tests.apps.shipping:inbox") as relays:
            relays.start(1)
            wait_for(
                lambda: statuses(store).get("delivered", 0) == MESSAGES,
                timeout=120,
                what="every message delivered",
                describe=lambda: f"{statuses(store)}; {relays.describe()}",
            )
            codes = relays.terminate_all(timeout=30)
        assert set(codes.values()) == {0}
        # A session's counts reach the statistics when it ends: the relay's has just ended.
        deadline = time.monotonic() + 20
        while (after := _updates(store))["hookinbox_outbox"][0] - before["hookinbox_outbox"][
            0
        ] < MESSAGES:
            assert time.monotonic() < deadline, f"statistics never counted the drain: {after}"
            time.sleep(0.1)
        store.dispose()
    for table, (updated, hot) in after.items():
        updated, hot = updated - before[table][0], hot - before[table][1]
        assert updated >= MESSAGES, f"{table}: {updated} updates for {MESSAGES} messages"
        assert hot >= 0.9 * updated, f"{table}: {hot} of {updated} updates heap-only"
