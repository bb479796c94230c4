"""Paused sources (`Store.pausing`) on every database: a paused source's events are stored and
parked, never handed to a worker; a lease that took one before the pause loses it (its claim
matches nothing); resume makes them due again, each processed once; pause and resume are
audited."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox._model import NewDelivery, Status
from hookinbox._records import Actor
from hookinbox._storage import Store
from hookinbox._storage._schema import audit, event_queue, paused_sources

ACTOR = Actor("ops", "downstream broken")


def delivery(source: str, event_id: str) -> NewDelivery:
    body = f'{{"id": "{event_id}"}}'.encode()
    return NewDelivery(
        source=source,
        event_id=event_id,
        event_type="t",
        occurred_at=None,
        received_at=datetime.now(UTC) - timedelta(seconds=1),
        body=body,
        headers={},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )


def _lease(store: Store, limit: int = 100) -> list[tuple[str, str]]:
    now = datetime.now(UTC)
    lease = store.events.lease(limit=limit, now=now, until=now + timedelta(seconds=60))
    return sorted((item.event.source, item.event.id) for item in lease.fresh)


def _process(store: Store) -> list[tuple[str, str]]:
    """Lease and claim every due event (an attempt that succeeds)."""
    now = datetime.now(UTC)
    lease = store.events.lease(limit=100, now=now, until=now + timedelta(seconds=60))
    done = []
    for item in lease.fresh:
        with store.transaction() as connection:
            if store.events.claim(connection, item, Status.PROCESSED, now, "handled"):
                done.append((item.event.source, item.event.id))
    return sorted(done)


def test_a_paused_sources_events_are_stored_not_leased_then_resumed_once(store: Store) -> None:
    now = datetime.now(UTC)
    change = store.pausing.pause("stripe", now, ACTOR)
    assert not change.was_paused and change.events == 0
    for i in range(3):
        store.ingest.record(delivery("stripe", f"s{i}"))
    store.ingest.record(delivery("github", "g0"))
    assert _lease(store) == [("github", "g0")]
    # The lease parked what it took of stripe: shown as paused, its attempt given back.
    event = store.get_event("stripe", "s0")
    assert event is not None and event.status is Status.PAUSED and event.attempts == 0
    assert _lease(store) == []
    assert not store.events.has_due(datetime.now(UTC))
    assert [p.source for p in store.pausing.paused()] == ["stripe"]

    resumed = store.pausing.resume("stripe", datetime.now(UTC), ACTOR)
    assert resumed.was_paused and resumed.events == 3
    assert _process(store) == [("stripe", "s0"), ("stripe", "s1"), ("stripe", "s2")]
    assert _process(store) == []
    for i in range(3):
        event = store.get_event("stripe", f"s{i}")
        assert event is not None and event.status is Status.PROCESSED and event.attempts == 1


def test_pause_parks_the_open_events_and_takes_back_a_live_lease(store: Store) -> None:
    for i in range(4):
        store.ingest.record(delivery("stripe", f"s{i}"))
    now = datetime.now(UTC)
    lease = store.events.lease(limit=2, now=now, until=now + timedelta(seconds=60))
    assert len(lease.fresh) == 2
    change = store.pausing.pause("stripe", datetime.now(UTC), ACTOR)
    assert change.events == 4  # the two leased and the two waiting
    # The worker holding the lease taken before the pause: its claims match nothing.
    for item in lease.fresh:
        with store.transaction() as connection:
            assert not store.events.claim(connection, item, Status.PROCESSED, now, "handled")
    with store.reading() as connection:
        rows = connection.execute(
            sa.select(event_queue.c.state, event_queue.c.attempts, event_queue.c.lease_token)
        ).all()
    assert sorted(rows) == [("paused", 0, None)] * 4  # no attempt counted for the lease
    assert _lease(store) == []
    again = store.pausing.pause("stripe", datetime.now(UTC), ACTOR)  # again: fine
    assert again.was_paused and again.events == 0
    store.pausing.resume("stripe", datetime.now(UTC), ACTOR)
    assert len(_process(store)) == 4


def test_resume_keeps_a_deferred_events_state_and_a_cut_short_resume_finishes(
    store: Store,
) -> None:
    store.ingest.record(delivery("stripe", "s0"))
    with store.transaction() as connection:
        connection.execute(event_queue.update().values(state=Status.DEFERRED.value))
        connection.execute(sa.text("UPDATE hookinbox_events SET status = 'deferred'"))
    store.pausing.pause("stripe", datetime.now(UTC), ACTOR)
    with store.transaction() as connection:  # as a resume that died after its first step
        connection.execute(sa.text("DELETE FROM hookinbox_paused_sources"))
    change = store.pausing.resume("stripe", datetime.now(UTC), ACTOR)
    assert not change.was_paused and change.events == 1
    with store.reading() as connection:
        assert connection.execute(sa.select(event_queue.c.state)).scalar() == "deferred"


def test_pause_and_resume_are_audited(store: Store) -> None:
    store.pausing.pause("stripe", datetime.now(UTC), ACTOR)
    store.pausing.pause("stripe", datetime.now(UTC), Actor("auto-pause"))
    store.pausing.resume("stripe", datetime.now(UTC), Actor("ops"))
    store.pausing.resume("stripe", datetime.now(UTC), Actor("ops"))  # not paused: no row
    with store.reading() as connection:
        rows = connection.execute(
            sa.select(
                audit.c.source, audit.c.event_id, audit.c.action, audit.c.actor,
                audit.c.reason, audit.c.previous_status,
            ).order_by(audit.c.id)
        ).all()  # fmt: skip
    assert [tuple(row) for row in rows] == [
        ("stripe", "*", "pause", "ops", "downstream broken", "active"),
        ("stripe", "*", "pause", "auto-pause", None, "paused"),
        ("stripe", "*", "resume", "ops", None, "paused"),
    ]


def test_an_expired_lease_of_a_paused_source_is_parked_with_its_attempt_kept(
    store: Store,
) -> None:
    store.ingest.record(delivery("stripe", "s0"))
    now = datetime.now(UTC)
    first = store.events.lease(limit=1, now=now, until=now + timedelta(microseconds=1))
    assert len(first.fresh) == 1  # its worker dies; the lease runs out
    with store.transaction() as connection:  # paused with no parking (as an older code's row)
        connection.execute(
            paused_sources.insert().values(source="stripe", paused_at=now, actor="ops")
        )
    later = datetime.now(UTC) + timedelta(seconds=1)
    lease = store.events.lease(limit=1, now=later, until=later + timedelta(seconds=60))
    assert lease.fresh == [] and lease.expired == []
    with store.reading() as connection:
        row = connection.execute(sa.select(event_queue.c.state, event_queue.c.attempts)).one()
    assert tuple(row) == ("paused", 1)  # the dead worker's attempt stays counted
