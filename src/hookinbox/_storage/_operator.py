"""The operator gateway (`Store.operator`): list, show, search, replay and audit events; the
dashboard's signed-out sessions.

An operator's action never waits for a worker. An event's status is read as operators see it
(`_rows.EVENT_STATUS`: `processing` while a worker holds it). Events that are not done are
found through the queue's small open index, done ones through `received_at`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import DONE_STATUSES, WAITING_STATUSES, Event, Status
from hookinbox._records import (
    SCAN_LIMIT,
    Actor,
    Cursor,
    EventFilter,
    PayloadMatch,
    ReplayResult,
)
from hookinbox._storage._notify import CHANNEL
from hookinbox._storage._payload_codec import MAGIC, encrypting, read_body
from hookinbox._storage._payload_packing import compressing
from hookinbox._storage._rows import (
    EVENT_JOIN,
    EVENT_STATUS,
    EVENT_WITH_PAYLOAD,
    event_columns,
    event_from_row,
    select_events,
)
from hookinbox._storage._schema import (
    audit,
    deliveries,
    event_queue,
    events,
    payloads,
    revoked_sessions,
    status_is,
)
from hookinbox._storage._types import SafeText, UTCDateTime

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

LIST_COLUMNS = event_columns(without=("body", "headers", "lease_token"))
AUDIT_COLUMNS = [c for c in audit.c if c.name not in ("id", "source", "event_id")]
_WAITING = tuple(s.value for s in WAITING_STATUSES)
_HELD = event_queue.c.lease_token.is_not(None)


def _open(filters: EventFilter) -> bool:
    return filters.status is not None and filters.status not in DONE_STATUSES


def _rows_of(filters: EventFilter) -> sa.FromClause:
    """Where the filtered events are read: open ones from the queue's table (small, indexed
    by state), joined to their events; the others from the events with their queue rows."""
    if _open(filters):
        return event_queue.join(events, events.c.id == event_queue.c.id)
    return EVENT_JOIN


_UNSURE = "hookinbox_unsure_body"
_CODED = sa.func.substr(payloads.c.body, 1, len(MAGIC)) == sa.literal(MAGIC, sa.LargeBinary)
"""A payload stored coded (compressed or encrypted, `_payload_codec`): searched in Python."""
"""The column holding a body the search decides in Python (`Dialect.payload_unsure`)."""


def _before(table: sa.Table, cursor: Cursor | None) -> list[sa.ColumnElement[bool]]:
    """Rows older than `cursor` (a keyset page's `(received_at, id)`), newest first."""
    if cursor is None:
        return []
    received_at, row_id = cursor
    return [
        sa.or_(
            table.c.received_at < received_at,
            sa.and_(table.c.received_at == received_at, table.c.id < row_id),
        )
    ]


def where(filters: EventFilter) -> list[sa.ColumnElement[bool]]:
    """The filters over events joined to their queue rows."""
    clauses: list[sa.ColumnElement[bool]] = []
    status = filters.status
    if status in DONE_STATUSES:
        clauses.append(status_is(events.c.status, status.value))
    elif status is Status.PROCESSING:
        clauses += [status_is(event_queue.c.state, *_WAITING), _HELD]
    elif status in WAITING_STATUSES:
        clauses += [status_is(event_queue.c.state, status.value), ~_HELD]
    elif status is not None:  # failed, stale
        clauses.append(status_is(event_queue.c.state, status.value))
    if filters.source is not None:
        clauses.append(events.c.source == filters.source)
    if filters.event_type is not None:
        clauses.append(events.c.event_type == filters.event_type)
    received = event_queue.c.received_at if _open(filters) else events.c.received_at
    if filters.since is not None:
        clauses.append(received >= filters.since)
    if filters.until is not None:
        clauses.append(received < filters.until)
    if filters.event_id is not None:
        clauses.append(events.c.event_id == filters.event_id)
    if filters.error_contains is not None:
        # `%` and `_` in the text are the text: a filter is typed, never a pattern
        clauses.append(events.c.last_error.icontains(filters.error_contains, autoescape=True))
    return clauses


def _mark_erased(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Set each row's `payload_erased`: whether its payload row is gone (one look-up by
    primary key for the rows given, a page)."""
    if not rows:
        return
    ids = [row["id"] for row in rows]
    kept = set(connection.execute(sa.select(payloads.c.id).where(payloads.c.id.in_(ids))).scalars())
    for row in rows:
        row["payload_erased"] = row["id"] not in kept


class Operator:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def list_events(
        self,
        filters: EventFilter,
        limit: int,
        *,
        before: Cursor | None = None,
        payload: PayloadMatch | None = None,
        mark_erased: bool = False,
    ) -> list[dict[str, Any]]:
        """Newest first; no bodies (`get_event` has them).

        Pages by keyset: pass the last row's `(received_at, id)` as `before` for the next
        page. Each page is an index range read from where the previous one stopped, however
        deep it is (an OFFSET would read and throw away every row before it). Open events
        are read in the queue's open index, done ones in the events' `received_at` index.

        With `payload`, only the newest `SCAN_LIMIT` events matching the rest are searched:
        a page may then be short, or empty, with older matches left to find.

        With `mark_erased`, each row says whether its payload was erased (`payload_erased`:
        no payload row). The page is read by the same query as without; then, in the same
        snapshot, its rows' ids are looked up in `hookinbox_payloads` by primary key: the
        list's plan is unchanged, and the mark costs one short query on the page's ids (a
        derived table joined to the payloads took as long in the database, and 1 ms more to
        build in Python each time). A payload search finds only events whose payload is kept.
        """
        table = event_queue if _open(filters) else events
        newest = (table.c.received_at.desc(), table.c.id.desc())
        clauses = [*where(filters), *_before(table, before)]
        if payload is None:
            query = sa.select(*LIST_COLUMNS).select_from(_rows_of(filters)).where(*clauses)
            query = query.order_by(*newest).limit(limit)
            with self.store.reading() as connection:
                rows = [dict(row) for row in connection.execute(query).mappings()]
                if mark_erased:
                    _mark_erased(connection, rows)
                return rows
        scanned = (
            sa.select(table.c.id)
            .select_from(_rows_of(filters))
            .where(*clauses)
            .order_by(*newest)
            .limit(SCAN_LIMIT)
        )
        # The window as a derived table: MariaDB takes no LIMIT in an IN (...).
        window = sa.select(scanned.subquery("newest").c.id)
        found = self._search_window(payload, events.c.id.in_(window.scalar_subquery()), limit)
        return [{**row, "payload_erased": False} for row in found] if mark_erased else found

    def search_among(self, payload: PayloadMatch, ids: list[int]) -> list[int]:
        """Those of the events `ids` whose body holds `payload`, searched as `list_events`
        searches its window (in SQL, or decrypted here): an erasure's batch."""
        return [row["id"] for row in self._search_window(payload, events.c.id.in_(ids), len(ids))]

    def _search_window(
        self, payload: PayloadMatch, in_window: sa.ColumnElement[bool], limit: int
    ) -> list[dict[str, Any]]:
        """The newest `limit` events of the window whose body holds `payload`. The database
        cannot read a coded body (compressed or encrypted): with either on, every body of the
        window is read here; with both off, those in clear are searched in SQL and any coded
        ones (stored while an option was on) here, and the two merged newest first."""
        if encrypting() or compressing():
            return self._search_decrypted(payload, in_window, limit)
        clear = self._search(payload, sa.and_(in_window, sa.not_(_CODED)), limit)
        coded = self._search_decrypted(payload, sa.and_(in_window, _CODED), limit)
        if not coded:
            return clear
        newest = sorted([*clear, *coded], key=lambda r: (r["received_at"], r["id"]), reverse=True)
        return newest[:limit]

    def _search_decrypted(
        self, payload: PayloadMatch, in_window: sa.ColumnElement[bool], limit: int
    ) -> list[dict[str, Any]]:
        """As `_search`, over the same window, with each body read and decoded here and
        searched as handlers read it (`payload_text`): the same answers, at the cost of
        reading the window's bodies (5,000 at most) out of the database."""
        query = (
            sa.select(*LIST_COLUMNS, payloads.c.body.label(_UNSURE))
            .select_from(EVENT_WITH_PAYLOAD)
            .where(in_window)
            .order_by(events.c.received_at.desc(), events.c.id.desc())
        )
        found: list[dict[str, Any]] = []
        with self.store.reading() as connection:
            for row in connection.execute(query).mappings():
                found_row = dict(row)
                stored = found_row.pop(_UNSURE)
                if stored is None:  # no payload row (an erased event): nothing to match
                    continue
                body = read_body(stored, row["source"], row["event_id"])
                if self.store.dialect.payload_text(body, payload) == payload.value:
                    found.append(found_row)
                    if len(found) >= limit:
                        break
        return found

    def _search(
        self, payload: PayloadMatch, in_window: sa.ColumnElement[bool], limit: int
    ) -> list[dict[str, Any]]:
        """The newest `limit` events of the window whose body holds `payload`."""
        dialect = self.store.dialect
        unsure = dialect.payload_unsure(payload)

        def page(after: Cursor | None, *, careful: bool = False) -> sa.Select[Any]:
            value = dialect.payload_value(payload, careful=careful)
            columns: list[Any] = list(LIST_COLUMNS)
            found: sa.ColumnElement[bool] = value == payload.value
            if unsure is not None:
                # A body the database reads otherwise than a handler (a repeated key) comes
                # back with its body, to be read in Python as the handler reads it.
                found = sa.or_(found, unsure)
                columns.append(sa.case((unsure, payloads.c.body), else_=None).label(_UNSURE))
            query = sa.select(*columns).select_from(EVENT_WITH_PAYLOAD)
            query = query.where(in_window, found, *_before(events, after))
            return query.order_by(events.c.received_at.desc(), events.c.id.desc()).limit(limit)

        def read(connection: Connection, after: Cursor | None) -> list[dict[str, Any]]:
            try:
                with connection.begin_nested():
                    return [dict(row) for row in connection.execute(page(after)).mappings()]
            except sa.exc.DataError:
                # A body in the window the database cannot read as JSON (PostgreSQL's jsonb:
                # a NUL escape, NaN, UTF-16): searched again, each body checked first.
                rows = connection.execute(page(after, careful=True)).mappings()
                return [dict(row) for row in rows]

        found_rows: list[dict[str, Any]] = []
        after: Cursor | None = None
        with self.store.reading() as connection:
            while True:
                rows = read(connection, after)
                for row in rows:
                    stored = row.pop(_UNSURE, None)
                    body = (
                        None
                        if stored is None
                        else read_body(stored, row["source"], row["event_id"])
                    )
                    if body is None or dialect.payload_text(body, payload) == payload.value:
                        found_rows.append(row)
                # Rows read in Python and not kept leave room: the page goes on past them,
                # within the same window, until it is full or the window is read.
                if len(rows) < limit or len(found_rows) >= limit:
                    return found_rows[:limit]
                after = (rows[-1]["received_at"], rows[-1]["id"])

    def all_events(self, source: str | None = None) -> list[Event]:
        """Every stored event (of `source`), oldest first, bodies included: for test kits
        and tools on small inboxes, not for a large one."""
        query = select_events().order_by(events.c.id)
        if source is not None:
            query = query.where(events.c.source == source)
        with self.store.reading() as connection:
            return [event_from_row(row) for row in connection.execute(query).mappings()]

    def count_events(self, filters: EventFilter) -> int:
        query = sa.select(sa.func.count()).select_from(_rows_of(filters)).where(*where(filters))
        with self.store.reading() as connection:
            return int(connection.execute(query).scalar_one())

    def source_exists(self, source: str) -> bool:
        """Whether any event of `source` is stored: one look-up in the (source, event_id)
        index."""
        query = sa.select(events.c.id).where(events.c.source == source).limit(1)
        with self.store.reading() as connection:
            return connection.execute(query).first() is not None

    def known_sources(self) -> list[str]:
        """Every source name with stored events (a scan of the index: for hints only)."""
        query = sa.select(events.c.source).distinct().order_by(events.c.source)
        with self.store.reading() as connection:
            return list(connection.execute(query).scalars())

    def delivery_history(self, source: str, event_id: str) -> list[dict[str, Any]]:
        query = (
            sa.select(deliveries.c.received_at, deliveries.c.duplicate, deliveries.c.key_conflict)
            .where(deliveries.c.source == source, deliveries.c.event_id == event_id)
            .order_by(deliveries.c.received_at, deliveries.c.id)
        )
        with self.store.reading() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    def audit_trail(self, source: str, event_id: str) -> list[dict[str, Any]]:
        """The operator actions on an event, oldest first."""
        query = (
            sa.select(*AUDIT_COLUMNS)
            .where(audit.c.source == source, audit.c.event_id == event_id)
            .order_by(audit.c.id)
        )
        with self.store.reading() as connection:
            return [dict(row) for row in connection.execute(query).mappings()]

    # -- replays ------------------------------------------------------------------------------

    def replay_one(
        self, source: str, event_id: str, now: datetime, *, force: bool, actor: Actor
    ) -> tuple[ReplayResult, Status | None]:
        """Back to pending, its retry budget full again; returns the result and the status
        it had.

        `attempts` keeps counting (it is history); `attempts_before_replay` takes its value,
        and the retry budget counts from there. A replay writes its audit row (`actor`, and
        the status, outcome and attempt count it had) in its own transaction; a refusal
        writes none.

        Never waits for a worker: an event being processed is refused from a plain read
        first, which takes no lock (on SQLite, not even the write lock a worker's
        transaction holds); on PostgreSQL the row is then locked `SKIP LOCKED`, so a row a
        worker has claimed since (its claim holds it) is refused too, not waited for.
        """
        key = (events.c.source == source, events.c.event_id == event_id)
        seen_query = sa.select(EVENT_STATUS).select_from(EVENT_JOIN).where(*key)
        with self.store.reading() as connection:
            seen = connection.execute(seen_query).first()
        if seen is None:
            return ReplayResult.NOT_FOUND, None
        if seen.status == Status.PROCESSING.value:
            return ReplayResult.IN_PROGRESS, Status.PROCESSING
        with self.store.transaction() as connection:
            locked = sa.select(events.c.id).where(*key).with_for_update(skip_locked=True)
            row_id = connection.execute(locked).scalar()
            status = connection.execute(seen_query).first()
            if status is None:
                return ReplayResult.NOT_FOUND, None
            previous = Status(status.status)
            if row_id is None or previous is Status.PROCESSING:  # held: SKIP LOCKED hid it
                return ReplayResult.IN_PROGRESS, previous
            if previous is Status.PROCESSED and not force:
                return ReplayResult.NEEDS_FORCE, previous
            _replay(connection, self.store, [row_id], now, actor)
            return ReplayResult.REPLAYED, previous

    def replay_batch(
        self, filters: EventFilter, now: datetime, *, actor: Actor, after: int, batch_size: int
    ) -> tuple[list[int], list[int]]:
        """Replay the next matching events after row id `after`, at most `batch_size`: (the
        ids read, in order, the ids replayed). Empty ids read: none is left.

        The matching rows are found by a read, which holds no lock (on SQLite, not the write
        lock: a filter that matches few of many rows may read long); the write then locks
        and replays only those ids that still match, by their primary key, so it holds the
        writer for a batch of rows whatever the filter. A row a worker holds is skipped (SKIP
        LOCKED), never waited for, and a worker's progress since the read is never undone.
        """
        if filters.status is None or filters.status is Status.PROCESSING:
            raise ValueError("bulk replay needs a status other than processing")
        matching = sa.select(events.c.id).select_from(_rows_of(filters)).where(*where(filters))
        with self.store.reading() as connection:
            read = list(
                connection.execute(
                    matching.where(events.c.id > after).order_by(events.c.id).limit(batch_size)
                ).scalars()
            )
        if not read:
            return [], []
        with self.store.transaction() as connection:
            ids = list(
                connection.execute(
                    matching.where(events.c.id.in_(read))
                    .order_by(events.c.id)
                    .with_for_update(of=events, skip_locked=True)
                ).scalars()
            )
            if ids:
                _replay(connection, self.store, ids, now, actor)
        return read, ids

    # -- the dashboard's sessions -------------------------------------------------------------

    def revoke_session(self, session_id: str, *, expires_at: datetime, now: datetime) -> None:
        """Record `session_id` as signed out (again is fine) and forget expired revocations.

        A session cookie is signed, not stored, so without this table a cookie copied before
        sign-out would stay valid until it expires; every signed-in request looks its id up
        (a primary-key read). Rows past their expiry are deleted here: the table holds at
        most the sessions signed out within one cookie lifetime."""
        with self.store.transaction() as connection:
            connection.execute(revoked_sessions.delete().where(revoked_sessions.c.expires_at < now))
            known = sa.select(revoked_sessions.c.session_id).where(
                revoked_sessions.c.session_id == session_id
            )
            if connection.execute(known).first() is None:
                connection.execute(
                    revoked_sessions.insert().values(session_id=session_id, expires_at=expires_at)
                )

    def session_revoked(self, session_id: str) -> bool:
        query = sa.select(revoked_sessions.c.session_id).where(
            revoked_sessions.c.session_id == session_id
        )
        with self.store.reading() as connection:
            return connection.execute(query).first() is not None


def _replay(
    connection: Connection, store: StoreSeam, ids: list[int], now: datetime, actor: Actor
) -> None:
    """Audit, then replay, the events `ids` (locked by the caller): each back to pending with
    its retry budget full again, its queue row made (or made due) at once; workers woken."""
    chosen = events.c.id.in_(ids)
    _record_replays(connection, chosen, now, actor)
    connection.execute(events.update().where(chosen).values(**_replay_values(now)))
    queued = sa.select(
        events.c.id,
        sa.literal(Status.PENDING.value, sa.String()),
        sa.literal(now, UTCDateTime()),
        events.c.received_at,
        events.c.attempts,
    ).where(chosen)
    insert = store.dialect.insert(event_queue).from_select(
        ["id", "state", "next_attempt_at", "received_at", "attempts"], queued
    )
    connection.execute(
        insert.on_conflict_do_update(
            index_elements=[event_queue.c.id],
            set_={
                "state": Status.PENDING.value,
                "next_attempt_at": insert.excluded.next_attempt_at,
                "lease_token": None,
                "lease_expires_at": None,
            },
        )
    )
    store.dialect.notify(connection, CHANNEL)  # the insert trigger does not see a replay


def _record_replays(
    connection: Connection, chosen: sa.ColumnElement[bool], now: datetime, actor: Actor
) -> None:
    """One audit row per chosen event, as it is before the replay's update.

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
    ).where(chosen)
    names = [
        "source", "event_id", "at", "action", "actor", "reason",
        "previous_status", "previous_outcome", "previous_attempts",
    ]  # fmt: skip
    connection.execute(audit.insert().from_select(names, rows))


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
        "outcome": None,
        "processed_at": None,
    }
