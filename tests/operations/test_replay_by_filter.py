"""Replay by filter: the dry run's count is what a replay changes, only matching events are
replayed, each with its audit row, and a large match goes in bounded, paced batches."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from hookinbox import Status
from hookinbox._operations._replay import REPLAY_MAX_BATCH
from hookinbox._operations._service import Operations
from hookinbox._records import Actor, EventFilter
from hookinbox._storage import Store
from hookinbox._storage._operator import Operator
from hookinbox._storage._schema import audit, events

NOW = datetime.now(UTC)


def add(store: Store, rows: list[tuple[str, str, Status, str | None, int]]) -> None:
    """(source, event id, status, last error, age in hours) each."""
    body = b"{}"
    digest = hashlib.sha256(body).hexdigest()
    with store.transaction() as connection:
        for start in range(0, len(rows), 2_000):
            connection.execute(
                events.insert(),
                [
                    {"source": source, "event_id": event_id, "event_type": "invoice.paid",
                     "occurred_at": NOW - timedelta(hours=age),
                     "received_at": NOW - timedelta(hours=age), "body": body, "headers": "{}",
                     "body_sha256": digest, "status": status.value, "attempts": 3,
                     "deferrals": 0, "next_attempt_at": NOW, "delivery_count": 1,
                     "key_conflicts": 0, "last_delivery_at": NOW, "last_error": error}
                    for source, event_id, status, error, age in rows[start : start + 2_000]
                ],
            )  # fmt: skip


def statuses(store: Store) -> dict[tuple[str, str], str]:
    query = sa.select(events.c.source, events.c.event_id, events.c.status)
    with store.reading() as connection:
        return {(r.source, r.event_id): r.status for r in connection.execute(query)}


class Observed(Operator):
    """The store's operator gateway, recording each replay transaction's size."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.transactions: list[int] = []

    def replay_batch(
        self, filters: EventFilter, now: datetime, *, actor: Actor, after: int, batch_size: int
    ) -> tuple[list[int], list[int]]:
        read, replayed = super().replay_batch(
            filters, now, actor=actor, after=after, batch_size=batch_size
        )
        self.transactions.append(len(replayed))
        return read, replayed


def test_only_the_matching_events_are_replayed_each_audited(store: Store) -> None:
    add(store, [
        ("stripe", "evt_erp_1", Status.FAILED, "ERP Timeout after 30 s", 1),
        ("stripe", "evt_erp_2", Status.FAILED, "erp timeout after 30 s", 2),
        ("stripe", "evt_erp_old", Status.FAILED, "ERP timeout", 72),  # outside --since
        ("stripe", "evt_declined", Status.FAILED, "card_declined", 1),
        ("stripe", "evt_pct", Status.FAILED, "100% timeout_x", 1),
        ("stripe", "evt_stale", Status.STALE, "ERP timeout", 1),  # another status
        ("github", "evt_erp_gh", Status.FAILED, "ERP timeout", 1),  # another source
        ("stripe", "evt_none", Status.FAILED, None, 1),
    ])  # fmt: skip
    operations = Operations(store)
    filters = EventFilter(
        Status.FAILED, "stripe", "invoice.paid", since=NOW - timedelta(days=1), until=NOW,
        error_contains="timeout",
    )  # fmt: skip
    before = statuses(store)

    count = operations.count_events(filters)
    replayed = sum(operations.replay_matching(filters, NOW, actor=Actor("ops", "ERP back")))

    after = statuses(store)
    changed = {key for key in after if after[key] != before[key]}
    assert changed == {("stripe", "evt_erp_1"), ("stripe", "evt_erp_2"), ("stripe", "evt_pct")}
    assert count == replayed == 3
    assert all(after[key] == "pending" for key in changed)
    with store.reading() as connection:
        rows = connection.execute(
            sa.select(audit.c.event_id, audit.c.actor, audit.c.reason, audit.c.previous_status)
        ).all()
    assert sorted(rows) == [
        (event_id, "ops", "ERP back", "failed")
        for event_id in ("evt_erp_1", "evt_erp_2", "evt_pct")
    ]
    # Typed text, not a pattern: `%` and `_` match themselves only.
    assert operations.count_events(EventFilter(error_contains="0%x")) == 0
    assert operations.count_events(EventFilter(error_contains="t_meout")) == 0
    assert operations.count_events(EventFilter(error_contains="% TIMEOUT_")) == 1


def test_5000_matches_are_replayed_in_bounded_batches(store: Store) -> None:
    """A large match: every transaction changes at most `REPLAY_MAX_BATCH` events, the rows
    that do not match in between are left alone, and each replayed event has its audit row."""
    rows = [("stripe", f"evt_{n}", Status.FAILED, "ERP timeout", 1) for n in range(5_000)]
    rows += [("stripe", f"evt_declined_{n}", Status.FAILED, "card_declined", 1) for n in range(500)]
    add(store, rows)
    operator = Observed(store)
    operations = Operations(store)
    operations._store = _With(store, operator)  # type: ignore[assignment]
    filters = EventFilter(Status.FAILED, error_contains="timeout")

    count = operations.count_events(filters)
    batches = list(operations.replay_matching(filters, NOW, actor=Actor("ops", None)))

    assert count == sum(batches) == 5_000
    assert max(operator.transactions) <= REPLAY_MAX_BATCH
    assert len(operator.transactions) >= 5_000 // REPLAY_MAX_BATCH
    assert operations.count_events(EventFilter(Status.FAILED)) == 500
    with store.reading() as connection:
        audited = connection.execute(sa.select(sa.func.count()).select_from(audit)).scalar_one()
    assert audited == 5_000


class _With:
    """A store whose operator gateway is `operator` (everything else the store's own)."""

    def __init__(self, store: Store, operator: Operator) -> None:
        self._store = store
        self.operator = operator

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)
