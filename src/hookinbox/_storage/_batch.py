"""Storing many deliveries with one upsert: the statements behind group commit.

PostgreSQL: ONE statement per batch. A data-modifying CTE upserts the events
(`INSERT ... SELECT FROM json_to_recordset(<the batch as JSON>) ON CONFLICT DO UPDATE ...
RETURNING`, the bodies sliced from one bytea) and inserts their delivery-log rows, joined to
what the upsert returned. One statement is
atomic on its own, so group commit runs it in autocommit: one round trip and one commit per
batch, where BEGIN, two statements and COMMIT would take four. The text never changes, so the
server keeps it prepared.

SQLite: the upsert as a multi-row `VALUES` list (one text per row count) and the log rows in a
second statement, in the caller's transaction (in process: no round trips to save).

The statements are driver-level SQL rather than built with SQLAlchemy: compiling a multi-row
insert costs more CPU than the round trips it saves. `tests/storage/test_batch.py` checks that
batches write exactly what `record_delivery` writes, column by column, however they are cut.

Deliveries of one event inside a batch are folded into one row of the upsert (PostgreSQL
refuses to update a row twice in a statement): the first carries the count, and only it can be
new; the others are duplicates of it, as if they had arrived just after. Folded deliveries
share a body: one with a different body (a key conflict inside the batch, which is rare) goes
into a later statement, so that every conflict is counted exactly by the database. Such a
delivery is then counted after its siblings of the same batch: they arrived together, and
any order among them is one that could have happened.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection

from hookinbox._model import NewDelivery, RecordedDelivery, Status, initial_status
from hookinbox._text import safe_text

_EVENT_COLUMNS = (
    "source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256, "
    "status, attempts, deferrals, next_attempt_at, delivery_count, key_conflicts, "
    "last_delivery_at, last_error"
)
# On a conflict the stored row keeps its body; every folded delivery is counted, and when the
# (shared) body differs from the stored one, each of them is a key conflict. A statement that
# carries a conflicting body runs after the one that folded its siblings, so the latest
# delivery time is kept with GREATEST (MAX on SQLite) rather than overwritten.
_ON_CONFLICT = """
ON CONFLICT (source, event_id) DO UPDATE SET
    delivery_count = hookinbox_events.delivery_count + excluded.delivery_count,
    key_conflicts = hookinbox_events.key_conflicts + CASE
        WHEN hookinbox_events.body_sha256 <> excluded.body_sha256
        THEN excluded.delivery_count ELSE 0 END,
    last_delivery_at = {latest}(hookinbox_events.last_delivery_at, excluded.last_delivery_at)
RETURNING id, source, event_id, delivery_count, body_sha256, status
"""
# The batch travels as two parameters: the events and the delivery-log rows as one JSON text,
# and every body in one bytea (each event names its slice). One array parameter per column was
# the first form: psycopg builds an array literal in Python, escaping each element, which cost
# about 20 us of the writer's CPU per row, a third of a saturated server's writer thread
# (a body, headers' JSON and timestamps escaped character by character); a JSON text is
# written by the C encoder and read once by PostgreSQL, a bytea is copied as it stands.
_POSTGRES = f"""
WITH batch AS (
    SELECT b.s AS source, b.i AS event_id, b.t AS event_type, b.o AS occurred_at,
           b.r AS received_at, substring(%(bodies)s::bytea FROM b.bo FOR b.bn) AS body,
           b.h AS headers, b.d AS body_sha256, b.st AS status, b.c AS delivery_count,
           b.l AS last_delivery_at, b.e AS last_error
    FROM json_to_recordset(%(events)s::json -> 0) AS b(
        s varchar, i varchar, t varchar, o timestamptz, r timestamptz, bo int, bn int,
        h text, d varchar, st varchar, c int, l timestamptz, e text)
), upserted AS (
    INSERT INTO hookinbox_events ({_EVENT_COLUMNS})
    SELECT source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256,
           status, 0, 0, received_at, delivery_count, 0, last_delivery_at, last_error
    FROM batch
    {_ON_CONFLICT.format(latest="GREATEST")}
), logged AS (
    INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict)
    SELECT u.source, u.event_id, l.r,
           NOT (l.p = 1 AND u.delivery_count = l.f),
           u.body_sha256 <> l.d
    FROM json_to_recordset(%(events)s::json -> 1)
         AS l(s varchar, i varchar, r timestamptz, p int, f int, d varchar)
    JOIN upserted u ON u.source = l.s AND u.event_id = l.i
)
SELECT id, source, event_id, delivery_count, body_sha256, status FROM upserted
"""
_SQLITE_LOG = (
    "INSERT INTO hookinbox_deliveries (received_at, source, event_id, duplicate, key_conflict) "
    "VALUES (?, ?, ?, ?, ?)"
)


@functools.lru_cache(maxsize=64)
def _sqlite_upsert(rows: int) -> str:
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, 0, ?, ?)"] * rows)
    upsert = _ON_CONFLICT.format(latest="MAX")
    return f"INSERT INTO hookinbox_events ({_EVENT_COLUMNS}) VALUES {values}{upsert}"


_STATUSES = {status.value: status for status in Status}
"""A stored status's member, without the enum's own lookup (about a microsecond a row)."""
_headers_json = json.JSONEncoder(sort_keys=True).encode
"""`json.dumps(headers, sort_keys=True)`, as `record_delivery` writes them, without a new
encoder per call (which is what `json.dumps` builds whenever it is given an option)."""


def _sqlite_time(value: datetime | None) -> str | None:
    """The text SQLAlchemy's SQLite DateTime writes (naive UTC, a four-digit year, always with
    microseconds), so rows from a batch sort and compare with every other row. `isoformat`
    rather than `strftime`: a third of the SQLite writer's CPU went to `strftime`."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]  # less the "+00:00"


@dataclass(frozen=True, slots=True)
class _Group:
    """The deliveries of one event in one statement, folded into the one row they upsert."""

    members: list[int]
    """Their indexes in the batch, in arrival order; they share a body."""
    first: NewDelivery
    last_delivery_at: datetime


Row = tuple[int, int, str, str]
"""What the upsert returns per event: id, delivery_count, body_sha256, status."""


def record_deliveries(
    connection: Connection, deliveries: Sequence[NewDelivery]
) -> list[RecordedDelivery]:
    """Store `deliveries`; one result per delivery, in order.

    On PostgreSQL each statement is atomic by itself (run it in autocommit or in a
    transaction); on SQLite, call it inside a transaction.
    """
    results: list[RecordedDelivery | None] = [None] * len(deliveries)
    for groups in _statements(deliveries):
        if connection.dialect.name == "postgresql":
            rows = _write_postgres(connection, deliveries, groups)
        else:
            rows = _write_sqlite(connection, deliveries, groups)
        for group in groups:
            row_id, stored_count, stored_sha, status = rows[_key(group.first)]
            folded = len(group.members)
            created = stored_count == folded  # an existing row had >= 1 before this statement
            for position, index in enumerate(group.members):
                results[index] = RecordedDelivery(
                    row_id=row_id,
                    is_new=created and position == 0,
                    delivery_count=stored_count - folded + position + 1,
                    key_conflict=deliveries[index].body_sha256 != stored_sha,
                    status=_STATUSES[status],
                )
    return [r for r in results if r is not None]


def _key(delivery: NewDelivery) -> tuple[str, str]:
    return delivery.source, delivery.event_id


def _statements(deliveries: Sequence[NewDelivery]) -> list[list[_Group]]:
    """Fold the deliveries of each event; a delivery whose body differs from its event's
    first in this statement waits for the next statement (rare: a key conflict)."""
    remaining = list(range(len(deliveries)))
    statements: list[list[_Group]] = []
    while remaining:
        members_of: dict[tuple[str, str], list[int]] = {}
        later: list[int] = []
        for index in remaining:
            members = members_of.setdefault(_key(deliveries[index]), [])
            if members and deliveries[members[0]].body_sha256 != deliveries[index].body_sha256:
                later.append(index)
            else:
                members.append(index)
        # Rows in key order: two statements (two writers, two server processes) that share
        # events lock them in the same order, so they wait for each other instead of
        # deadlocking.
        statements.append(
            [
                _Group(
                    members_of[key],
                    deliveries[members_of[key][0]],
                    deliveries[members_of[key][-1]].received_at,
                )
                for key in sorted(members_of)
            ]
        )
        remaining = later
    return statements


def _write_postgres(
    connection: Connection, deliveries: Sequence[NewDelivery], groups: list[_Group]
) -> dict[tuple[str, str], Row]:
    events: list[dict[str, object]] = []
    log: list[dict[str, object]] = []
    bodies: list[bytes] = []
    offset = 1  # SQL's substring counts from 1
    for group in groups:
        first = group.first
        folded = len(group.members)
        events.append(
            {
                "s": first.source,
                "i": first.event_id,
                "t": first.event_type,
                "o": _iso(first.occurred_at),
                "r": first.received_at.isoformat(),
                "bo": offset,
                "bn": len(first.body),
                "h": _headers_json(first.headers),
                "d": first.body_sha256,
                "st": _status(first),
                "c": folded,
                "l": group.last_delivery_at.isoformat(),
                "e": _last_error(first),
            }
        )
        bodies.append(first.body)
        offset += len(first.body)
        for position, index in enumerate(group.members, start=1):
            log.append(
                {
                    "s": first.source,
                    "i": first.event_id,
                    "r": deliveries[index].received_at.isoformat(),
                    "p": position,
                    "f": folded,
                    "d": first.body_sha256,
                }
            )
    parameters = {"events": json.dumps([events, log]), "bodies": b"".join(bodies)}
    result = connection.exec_driver_sql(_POSTGRES, parameters)
    return {(r[1], r[2]): (r[0], r[3], r[4], r[5]) for r in result}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


_SQLITE_ROWS = 2_000
"""The most rows in one SQLite upsert (13 values each, within SQLite's 32,766 variables): a
group-commit batch passes `max_rows` by up to one batched delivery's events, and is then
written in two statements of the same transaction."""


def _write_sqlite(
    connection: Connection, deliveries: Sequence[NewDelivery], groups: list[_Group]
) -> dict[tuple[str, str], Row]:
    if len(groups) > _SQLITE_ROWS:
        rows: dict[tuple[str, str], Row] = {}
        for start in range(0, len(groups), _SQLITE_ROWS):
            chunk = groups[start : start + _SQLITE_ROWS]
            rows.update(_write_sqlite(connection, deliveries, chunk))
        return rows
    parameters: list[object] = []
    for group in groups:
        delivery = group.first
        received = _sqlite_time(delivery.received_at)
        parameters += (
            delivery.source,
            delivery.event_id,
            delivery.event_type,
            _sqlite_time(delivery.occurred_at),
            received,
            delivery.body,
            _headers_json(delivery.headers),
            delivery.body_sha256,
            _status(delivery),
            received,
            len(group.members),
            _sqlite_time(group.last_delivery_at),
            _last_error(delivery),
        )
    result = connection.exec_driver_sql(_sqlite_upsert(len(groups)), tuple(parameters))
    rows = {(r[1], r[2]): (r[0], r[3], r[4], r[5]) for r in result}
    log = []
    for group in groups:
        _, stored_count, stored_sha, _ = rows[_key(group.first)]
        created = stored_count == len(group.members)
        for position, index in enumerate(group.members):
            delivery = deliveries[index]
            log.append(
                (
                    _sqlite_time(delivery.received_at),
                    delivery.source,
                    delivery.event_id,
                    not (created and position == 0),
                    delivery.body_sha256 != stored_sha,
                )
            )
    connection.exec_driver_sql(_SQLITE_LOG, log)
    return rows


def _status(delivery: NewDelivery) -> str:
    return initial_status(delivery).value


def _last_error(delivery: NewDelivery) -> str | None:
    """An invalid event's reason, escaped as `SafeText` escapes what `record_delivery`
    writes: these statements bypass SQLAlchemy's column types."""
    return None if delivery.invalid is None else safe_text(delivery.invalid)
