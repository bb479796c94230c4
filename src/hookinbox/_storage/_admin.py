"""Operator actions on the inbox: list, inspect, replay, prune, and claim scheduled jobs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import DONE_STATUSES, MessageStatus, Status
from hookinbox._storage._dialects import dialect_named
from hookinbox._storage._notify import CHANNEL
from hookinbox._storage._schema import (
    audit,
    deliveries,
    events,
    jobs,
    open_event_status,
    outbox,
    status_is,
)
from hookinbox._storage._search import SCAN_LIMIT, PayloadMatch, payload_match
from hookinbox._storage._store import Store
from hookinbox._storage._types import SafeText, UTCDateTime

LIST_COLUMNS = [c for c in events.c if c.name not in ("body", "headers", "lease_token")]


@dataclass(frozen=True, slots=True)
class EventFilter:
    status: Status | None = None
    source: str | None = None
    event_type: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    """Received strictly before this time."""
    event_id: str | None = None

    def where(self) -> list[sa.ColumnElement[bool]]:
        clauses: list[sa.ColumnElement[bool]] = []
        if self.status in DONE_STATUSES:
            clauses.append(status_is(events.c.status, self.status.value))
        elif self.status is not None:
            clauses.append(open_event_status(self.status.value))
        if self.source is not None:
            clauses.append(events.c.source == self.source)
        if self.event_type is not None:
            clauses.append(events.c.event_type == self.event_type)
        if self.since is not None:
            clauses.append(events.c.received_at >= self.since)
        if self.until is not None:
            clauses.append(events.c.received_at < self.until)
        if self.event_id is not None:
            clauses.append(events.c.event_id == self.event_id)
        return clauses


Cursor = tuple[datetime, int]
"""Where a page of `list_events` ended: the last row's (received_at, id)."""


def list_events(
    store: Store,
    filters: EventFilter,
    limit: int,
    *,
    before: Cursor | None = None,
    payload: PayloadMatch | None = None,
) -> list[dict[str, Any]]:
    """Newest first; no bodies (`show` has them).

    Pages by keyset: pass the last row's `(received_at, id)` as `before` for the next page.
    Each page is an index range read from where the previous one stopped, however deep it is
    (an OFFSET would read and throw away every row before it).

    With `payload`, only the newest `SCAN_LIMIT` events matching the rest are searched
    (`_search.py`): a page may then be short, or empty, with older matches left to find.
    """
    keyset: list[sa.ColumnElement[bool]] = []
    if before is not None:
        received_at, row_id = before
        keyset.append(
            sa.or_(
                events.c.received_at < received_at,
                sa.and_(events.c.received_at == received_at, events.c.id < row_id),
            )
        )
    newest = (events.c.received_at.desc(), events.c.id.desc())
    clauses = [*filters.where(), *keyset]
    if payload is not None:
        scanned = sa.select(events.c.id).where(*clauses).order_by(*newest).limit(SCAN_LIMIT)
        clauses = [
            events.c.id.in_(scanned.scalar_subquery()),
            payload_match(store.dialect, payload),
        ]
    query = sa.select(*LIST_COLUMNS).where(*clauses).order_by(*newest).limit(limit)
    with store.reading() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def source_exists(store: Store, source: str) -> bool:
    """Whether any event of `source` is stored: one look-up in the (source, event_id) index."""
    query = sa.select(events.c.id).where(events.c.source == source).limit(1)
    with store.reading() as connection:
        return connection.execute(query).first() is not None


def known_sources(store: Store) -> list[str]:
    """Every source name with stored events (a scan of the index: for hints, not hot paths)."""
    query = sa.select(events.c.source).distinct().order_by(events.c.source)
    with store.reading() as connection:
        return list(connection.execute(query).scalars())


def delivery_history(store: Store, source: str, event_id: str) -> list[dict[str, Any]]:
    query = (
        sa.select(deliveries.c.received_at, deliveries.c.duplicate, deliveries.c.key_conflict)
        .where(deliveries.c.source == source, deliveries.c.event_id == event_id)
        .order_by(deliveries.c.received_at, deliveries.c.id)
    )
    with store.reading() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


MESSAGE_COLUMNS = [c for c in outbox.c if c.name not in ("payload", "lease_token")]


def messages_for_event(
    store: Store, source: str, event_id: str, limit: int = 100
) -> list[dict[str, Any]]:
    """The outbox messages an event's handlers wrote, oldest first (at most `limit`)."""
    query = (
        sa.select(*MESSAGE_COLUMNS)
        .where(outbox.c.source == source, outbox.c.event_id == event_id)
        .order_by(outbox.c.id)
        .limit(limit)
    )
    with store.reading() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


class ReplayResult(StrEnum):
    REPLAYED = "replayed"
    NOT_FOUND = "not_found"
    NEEDS_FORCE = "needs_force"
    """The event was processed: running it again repeats its effects. (An unhandled event ran
    no handler, so it replays freely: that is how events get processed by a handler added
    after they arrived.)"""
    IN_PROGRESS = "in_progress"
    """A worker holds it right now (its status is processing, or its row is locked): refused at
    once, never waited for."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who replays and why, for the audit trail."""

    who: str
    """The CLI's OS user, or "dashboard" (its one admin token names nobody)."""
    reason: str | None = None


AUDIT_COLUMNS = [c for c in audit.c if c.name not in ("id", "source", "event_id")]


def _record_replays(
    connection: Connection, where: list[sa.ColumnElement[bool]], now: datetime, actor: Actor
) -> None:
    """One audit row per event matching `where`, as it is before the replay's update.

    Runs in the replay's transaction, before its update and on the rows it has locked, so the
    rows record exactly what the update changes and commit or roll back with it.
    """
    forced = events.c.status == Status.PROCESSED.value
    action = sa.case((forced, sa.literal("forced_replay")), else_=sa.literal("replay"))
    rows = sa.select(
        events.c.source,
        events.c.event_id,
        sa.literal(now, UTCDateTime()),
        action,
        sa.literal(actor.who, sa.String()),
        sa.literal(actor.reason, SafeText()),  # typed, or PostgreSQL cannot infer a NULL
        events.c.status,
        events.c.outcome,
        events.c.attempts,
    ).where(*where)
    names = [
        "source", "event_id", "at", "action", "actor", "reason",
        "previous_status", "previous_outcome", "previous_attempts",
    ]  # fmt: skip
    connection.execute(audit.insert().from_select(names, rows))


def audit_trail(store: Store, source: str, event_id: str) -> list[dict[str, Any]]:
    """The operator actions on an event, oldest first."""
    query = (
        sa.select(*AUDIT_COLUMNS)
        .where(audit.c.source == source, audit.c.event_id == event_id)
        .order_by(audit.c.id)
    )
    with store.reading() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def _replay_values(now: datetime) -> dict[str, object]:
    # A processed event replayed (`--force`) keeps the mark: its handlers committed once.
    forced = sa.case(
        (events.c.status == Status.PROCESSED.value, sa.literal(now, UTCDateTime())),
        else_=events.c.forced_replay_at,
    )
    return {
        "forced_replay_at": forced,
        "status": Status.PENDING.value,
        # Attempts are history: the count goes on, and the retry budget counts from here.
        "attempts_before_replay": events.c.attempts,
        "deferrals": 0,
        "deferred_since": None,
        "next_attempt_at": now,
        "outcome": None,
        "processed_at": None,
    }


def notify_workers(connection: Connection) -> None:
    """Wake PostgreSQL workers now; the insert trigger does not see a replay."""
    dialect_named(connection.dialect.name).notify(connection, CHANNEL)


def replay_one(
    store: Store, source: str, event_id: str, now: datetime, *, force: bool, actor: Actor
) -> tuple[ReplayResult, Status | None]:
    """Back to pending, its retry budget full again; returns the result and the status it had.

    `attempts` keeps counting (it is history); `attempts_before_replay` takes its value, and the
    retry budget counts from there. A replay writes its audit row (`actor`, and the status,
    outcome and attempt count it had)
    in its own transaction; a refusal writes none.

    Never waits for a worker: an operator's action must not queue behind a handler (that
    held a pooled connection per waiting replay, and enough of them starved ingest). An event
    being processed is refused from a plain read first, which takes no lock (on SQLite, not
    even the write lock a worker's transaction holds); on PostgreSQL the row is then locked
    `SKIP LOCKED`, so a row a worker has claimed since is refused too, not waited for.
    """
    key = (events.c.source == source, events.c.event_id == event_id)
    status = sa.select(events.c.status).where(*key)
    with store.reading() as connection:
        seen = connection.execute(status).first()
    if seen is None:
        return ReplayResult.NOT_FOUND, None
    if seen.status == Status.PROCESSING.value:
        return ReplayResult.IN_PROGRESS, Status.PROCESSING
    with store.transaction() as connection:
        row = connection.execute(status.with_for_update(skip_locked=True)).first()
        if row is None:  # gone since (pruned), or locked: SKIP LOCKED hides a held row
            row = connection.execute(status).first()
            if row is None:
                return ReplayResult.NOT_FOUND, None
            return ReplayResult.IN_PROGRESS, Status(row.status)
        previous = Status(row.status)
        if previous is Status.PROCESSING:
            return ReplayResult.IN_PROGRESS, previous
        if previous is Status.PROCESSED and not force:
            return ReplayResult.NEEDS_FORCE, previous
        _record_replays(connection, list(key), now, actor)
        connection.execute(events.update().where(*key).values(**_replay_values(now)))
        notify_workers(connection)
        return ReplayResult.REPLAYED, previous


def count_events(store: Store, filters: EventFilter) -> int:
    query = sa.select(sa.func.count()).select_from(events).where(*filters.where())
    with store.reading() as connection:
        return int(connection.execute(query).scalar_one())


def replay_matching(
    store: Store, filters: EventFilter, now: datetime, *, actor: Actor, batch_size: int = 500
) -> Iterator[int]:
    """Replay every event matching `filters` (a status must be given), batch by batch.

    Yields the size of each batch, for a progress bar. Only events that still match when their
    batch runs are touched, so a concurrent worker's progress is never undone.
    """
    if filters.status is None or filters.status is Status.PROCESSING:
        raise ValueError("bulk replay needs a status other than processing")
    last_id = 0
    while True:
        with store.transaction() as connection:
            ids = list(
                connection.execute(
                    sa.select(events.c.id)
                    .where(*filters.where(), events.c.id > last_id)
                    .order_by(events.c.id)
                    .limit(batch_size)
                    .with_for_update(skip_locked=True)
                ).scalars()
            )
            if not ids:
                return
            chosen = [events.c.id.in_(ids), *filters.where()]
            _record_replays(connection, chosen, now, actor)
            connection.execute(events.update().where(*chosen).values(**_replay_values(now)))
            notify_workers(connection)
        last_id = ids[-1]
        yield len(ids)


def prunable(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Done events received before `cutoff`. Pending, deferred, processing, failed and stale
    events are never pruned, however old."""
    return [events.c.status.in_([s.value for s in DONE_STATUSES]), events.c.received_at < cutoff]


def prunable_log(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Delivery log rows received before `cutoff`: the log is kept for the retention by its
    own time, whatever became of the event (a failed or stale event keeps its row, its
    counters and its audit trail; its deliveries older than the retention go). A look-up of
    each row's event would join the log to the events, and grew with the table (bench/
    README.md, growth); by its own time it is one range of one index."""
    return [deliveries.c.received_at < cutoff]


def prunable_messages(cutoff: datetime) -> list[sa.ColumnElement[bool]]:
    """Delivered outbox messages created before `cutoff`; unsent and failed ones stay."""
    return [outbox.c.status == MessageStatus.DELIVERED.value, outbox.c.created_at < cutoff]


def count_prunable(store: Store, cutoff: datetime) -> tuple[int, int, int]:
    """(events, delivery log rows, outbox messages) a prune with this cutoff would delete."""
    with store.reading() as connection:
        event_count = connection.execute(
            sa.select(sa.func.count()).select_from(events).where(*prunable(cutoff))
        ).scalar_one()
        delivery_count = connection.execute(
            sa.select(sa.func.count()).select_from(deliveries).where(*prunable_log(cutoff))
        ).scalar_one()
        message_count = connection.execute(
            sa.select(sa.func.count()).select_from(outbox).where(*prunable_messages(cutoff))
        ).scalar_one()
    return int(event_count), int(delivery_count), int(message_count)


def prune_batch(store: Store, cutoff: datetime, batch_size: int) -> tuple[int, int, int]:
    """Delete up to `batch_size` prunable events, log rows and delivered messages each, in one
    short transaction; returns how many of each. Call until all three are zero."""
    with store.housekeeping() as connection:
        event_ids = list(
            connection.execute(
                sa.select(events.c.id)
                .where(*prunable(cutoff))
                .order_by(events.c.received_at)
                .limit(batch_size)
                .with_for_update(skip_locked=True)
            ).scalars()
        )
        if event_ids:
            connection.execute(events.delete().where(events.c.id.in_(event_ids)))
        delivery_ids = list(
            connection.execute(
                sa.select(deliveries.c.id)
                .where(*prunable_log(cutoff))
                .order_by(deliveries.c.received_at)
                .limit(batch_size)
            ).scalars()
        )
        if delivery_ids:
            connection.execute(deliveries.delete().where(deliveries.c.id.in_(delivery_ids)))
        message_ids = list(
            connection.execute(
                sa.select(outbox.c.id)
                .where(*prunable_messages(cutoff))
                .order_by(outbox.c.created_at)
                .limit(batch_size)
                .with_for_update(skip_locked=True)
            ).scalars()
        )
        if message_ids:
            connection.execute(outbox.delete().where(outbox.c.id.in_(message_ids)))
    return len(event_ids), len(delivery_ids), len(message_ids)


def claim_job(store: Store, name: str, slot: datetime, now: datetime) -> bool:
    """Claim the run of job `name` for the schedule slot starting at `slot`.

    A compare-and-set on the job's row: of all processes asking for the same slot, exactly one
    sees its update succeed. Works the same on SQLite and PostgreSQL.
    """
    claimed_at = max(now, slot)  # at or past the slot, so the slot reads as taken
    with store.transaction() as connection:
        exists = connection.execute(sa.select(jobs.c.name).where(jobs.c.name == name)).first()
        if exists is None:
            insert = sa.insert(jobs).values(name=name, last_run_at=claimed_at)
            try:
                with connection.begin_nested():
                    connection.execute(insert)
                return True
            except sa.exc.IntegrityError:
                pass  # another process created it first; fall through to the compare-and-set
        claimed = connection.execute(
            jobs.update()
            .where(jobs.c.name == name, jobs.c.last_run_at < slot)
            .values(last_run_at=claimed_at)
        )
        return claimed.rowcount == 1


def record_job_result(store: Store, name: str, result: str) -> None:
    with store.transaction() as connection:
        connection.execute(jobs.update().where(jobs.c.name == name).values(last_result=result))


def last_job_run(store: Store, name: str) -> tuple[datetime, str | None] | None:
    with store.reading() as connection:
        row = connection.execute(
            sa.select(jobs.c.last_run_at, jobs.c.last_result).where(jobs.c.name == name)
        ).first()
    return (row.last_run_at, row.last_result) if row else None
