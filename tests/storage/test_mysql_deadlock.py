"""Deadlocks on MariaDB, made for real: hookinbox's own transaction is InnoDB's victim.

Group commit writes a batch's rows in key order; a rival session (`tests/support/innodb.py`)
that locks two of them in the other order, and weighs more, makes InnoDB roll the batch back
(error 1213). The batch is then written again in a fresh transaction before any of its
deliveries is answered, so each is answered as if nothing had happened, and stored once; a
rivalry that outlasts three runs is answered 503 with nothing written. A prune batch caught
the same way is run again, and the prune finishes.

Each test asserts the deadlock itself from InnoDB's report (the victim was hookinbox's
session, the rival took part) and from hookinbox's counter: none can pass without one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from hookinbox import Reply
from hookinbox._operations._prune import prune
from hookinbox._receiver import Receiver
from hookinbox._settings import ReceiverSettings
from hookinbox._storage import GroupCommitter, Store
from hookinbox._storage._schema import deliveries, events
from hookinbox.sources import Stripe
from tests.storage.test_deliveries import delivery
from tests.support.innodb import Observer, create_weight, poll, retries, rival
from tests.support.signing import stripe_delivery, stripe_event

pytestmark = pytest.mark.parametrize("backend", ["mysql"])

SECRET = "whsec_deadlock"


@pytest.fixture
def observer(db_url: str) -> Iterator[Observer]:
    create_weight(db_url)
    watching = Observer(db_url)
    yield watching
    watching.close()


def signed(event_id: str) -> tuple[dict[str, str], bytes]:
    return stripe_delivery(stripe_event(event_id), SECRET)


class Batching:
    """A receiver on group commit, and the deliveries of one test sent to it in threads."""

    def __init__(self, store: Store) -> None:
        self.committer = GroupCommitter(store)
        # An ack deadline far from the test's steps: a 503 here can only be the deadlocks'.
        settings = ReceiverSettings(ack_deadline=30)
        sources = {"stripe": Stripe(secret=SECRET)}
        self.receiver = Receiver(store, sources, settings, committer=self.committer)
        self.pool = ThreadPoolExecutor(4)
        self.bodies = {name: signed(name) for name in ("evt_plug", "evt_a", "evt_b")}

    def send(self, event_id: str) -> Future[Reply]:
        headers, body = self.bodies[event_id]
        return self.pool.submit(self.receiver.receive, "stripe", headers, body)

    def queued(self) -> int:
        return self.committer._queue.qsize()  # what the writer will gather into its next batch

    def close(self) -> None:
        self.pool.shutdown()
        self.committer.close()


@pytest.fixture
def batching(store: Store) -> Iterator[Batching]:
    opened = Batching(store)
    yield opened
    opened.close()


def a_and_b_in_one_batch(
    batching: Batching, observer: Observer, plug_url: str
) -> tuple[Future[Reply], Future[Reply]]:
    """Queue evt_a and evt_b behind a batch that waits for a light rival's lock on evt_plug,
    then let that batch go: the writer gathers both into its next batch, one transaction."""
    with rival(plug_url, heavy=False) as plug:
        assert plug.lock_event("evt_plug") == 1
        plugged = batching.send("evt_plug")
        observer.wait_for_a_waiter(besides=(plug.thread_id,))
        answers = batching.send("evt_a"), batching.send("evt_b")
        poll(lambda: batching.queued() == 2, 10, "evt_a and evt_b queued behind the plug")
        plug.rollback()
    assert plugged.result(10).outcome == "duplicate"
    return answers


def test_a_batch_chosen_as_a_deadlock_victim_is_written_again_before_it_is_answered(
    db_url: str,
    store: Store,
    observer: Observer,
    batching: Batching,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for event_id in ("evt_plug", "evt_b"):  # stored before: their redeliveries lock them
        assert batching.send(event_id).result(10).outcome == "accepted"
    before = retries("ingest")
    with caplog.at_level(logging.WARNING, "hookinbox._storage"), rival(db_url) as heavy:
        assert heavy.lock_event("evt_b") == 1
        answers = a_and_b_in_one_batch(batching, observer, db_url)
        # The batch [evt_a, evt_b] inserted evt_a and waits for evt_b, which the rival holds.
        observer.wait_for_a_waiter(besides=(heavy.thread_id,))
        # The rival asks for evt_a: a cycle. InnoDB rolls back the lighter batch at once, and
        # the rival's read then finds no evt_a (READ COMMITTED: the insert was undone).
        assert heavy.lock_event("evt_a") == 0
        deadlock = observer.latest_deadlock()
        # The batch's second run waits for evt_b again, until the rival commits.
        observer.wait_for_a_waiter(besides=(heavy.thread_id,))
        heavy.commit()
        a, b = (answer.result(10) for answer in answers)

    assert heavy.thread_id in deadlock.sessions.values()
    assert deadlock.victim_session() != heavy.thread_id
    assert "INSERT INTO hookinbox_events" in deadlock.victim_text()
    assert retries("ingest") == before + 1
    assert [r.getMessage() for r in caplog.records if "deadlock" in r.getMessage()] == [
        "ingest: the database chose its transaction as a deadlock's victim (rolled back, "
        "nothing written); running it again (2 of 3)"
    ]
    assert (a.status_code, a.outcome, b.status_code, b.outcome) == (
        200, "accepted", 200, "duplicate",
    )  # fmt: skip
    event = store.get_event("stripe", "evt_a")
    assert event is not None and event.delivery_count == 1
    with store.reading() as connection:
        logged = connection.execute(
            sa.select(deliveries.c.event_id, sa.func.count())
            .group_by(deliveries.c.event_id)
            .order_by(deliveries.c.event_id)
        ).all()
    assert [tuple(row) for row in logged] == [("evt_a", 1), ("evt_b", 2), ("evt_plug", 2)]


def test_a_batch_still_a_victim_after_three_runs_is_answered_503_with_nothing_written(
    db_url: str, store: Store, observer: Observer, batching: Batching
) -> None:
    for event_id in ("evt_plug", "evt_b"):
        assert batching.send(event_id).result(10).outcome == "accepted"
    before = retries("ingest")
    victims = []
    with rival(db_url) as heavy:
        assert heavy.lock_event("evt_b") == 1
        answers = a_and_b_in_one_batch(batching, observer, db_url)
        for _ in range(3):  # each run of the batch waits for evt_b holding evt_a: a cycle
            observer.wait_for_a_waiter(besides=(heavy.thread_id,))
            assert heavy.lock_event("evt_a") == 0
            victims.append(observer.latest_deadlock().victim_session())
        a, b = (answer.result(10) for answer in answers)
        heavy.commit()

    assert heavy.thread_id not in victims and len(victims) == 3
    assert retries("ingest") == before + 2
    for reply in (a, b):
        assert reply.status_code == 503 and reply.headers["retry-after"].isdigit()
        assert "Deadlock" in reply.body["detail"]
    assert store.get_event("stripe", "evt_a") is None
    assert store.get_event("stripe", "evt_b").delivery_count == 1  # type: ignore[union-attr]


def test_a_prune_batch_chosen_as_a_deadlock_victim_is_run_again(
    db_url: str, store: Store, observer: Observer
) -> None:
    """The pruner deletes an old event, then the old log rows; a rival holding a log row and
    then asking for the event makes a cycle, and the prune batch is the lighter."""
    old = datetime.now(UTC) - timedelta(days=100)
    for n in range(3):
        store.ingest.record(delivery(event_id=f"evt_old_{n}", received_at=old))
    with store.transaction() as connection:
        connection.execute(events.update().values(status="processed", processed_at=old))
        connection.exec_driver_sql("DELETE FROM hookinbox_event_queue")
        event_id = connection.execute(
            sa.select(events.c.id).where(events.c.event_id == "evt_old_0")
        ).scalar_one()
        last_log = connection.execute(sa.select(sa.func.max(deliveries.c.id))).scalar_one()
    before = retries("prune")
    with ThreadPoolExecutor(1) as pool, rival(db_url) as heavy:
        assert heavy.lock("hookinbox_deliveries", "id = %s", last_log) == 1
        pruned = pool.submit(
            prune, store.housekeeping, now=datetime.now(UTC), retention=timedelta(days=90)
        )
        # The batch deleted the old events and waits for the log row the rival holds.
        observer.wait_for_a_waiter(besides=(heavy.thread_id,))
        assert heavy.lock("hookinbox_events", "id = %s", event_id) == 1  # a cycle: its victim
        deadlock = observer.latest_deadlock()
        heavy.commit()
        result = pruned.result(30)

    assert heavy.thread_id in deadlock.sessions.values()
    assert deadlock.victim_session() != heavy.thread_id
    assert "DELETE FROM hookinbox_deliveries" in deadlock.victim_text()
    assert retries("prune") == before + 1
    assert (result.events, result.deliveries) == (3, 3)
    with store.reading() as connection:
        assert connection.execute(sa.select(sa.func.count()).select_from(events)).scalar() == 0
