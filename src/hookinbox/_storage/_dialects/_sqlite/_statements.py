"""SQLite's statements: the upsert, group commit's batch, payload search's JSON walk, time
buckets and the index a read goes through."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite

from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    ON_CONFLICT,
    Group,
    Row,
    log_rows,
    payload_rows,
    upsert_parameters,
)
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._payloads import PAYLOAD_INSERT
from hookinbox._storage._schema import payloads

if TYPE_CHECKING:
    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions


class SQLiteStatements(Dialect):
    """The part of the dialect that answers for statements."""

    def insert(self, table: sa.TableClause) -> Upsert:
        return SQLiteUpsert(table)

    def read_through(self, query: sa.Select[Any], table: sa.Table, index: str) -> sa.Select[Any]:
        # Without statistics (no ANALYZE: a new database, or any that was never analysed)
        # SQLite reads the event queue's open rows by state and sorts the whole backlog for
        # each lease (3.6 ms a lease behind 6,000 events, against 0.2 through the due index:
        # bench/README.md). `INDEXED BY` names the index; `HintedCompiler` writes it.
        return query.with_hint(table, f"INDEXED BY {index}", dialect_name="sqlite")

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        if len(groups) > _MAX_ROWS:
            rows: dict[tuple[str, str], Row] = {}
            for start in range(0, len(groups), _MAX_ROWS):
                rows.update(
                    self.write_batch(connection, deliveries, groups[start : start + _MAX_ROWS])
                )
            return rows
        parameters = upsert_parameters(groups, sqlite_time)
        result = connection.exec_driver_sql(_upsert(len(groups)), tuple(parameters))
        rows = {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}
        connection.exec_driver_sql(_LOG, log_rows(deliveries, groups, rows, sqlite_time))
        if payloads := payload_rows(groups, rows):
            connection.exec_driver_sql(_PAYLOAD, payloads)
        return rows

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """The path walked one key at a time with `json_each`, taking the LAST member of a
        key an object repeats, as Python's parser (and so every handler) and PostgreSQL's
        jsonb read `{"a": 1, "a": 2}`: `json_extract` would read the first. `json_valid`
        first: a body SQLite cannot read is never walked (careful or not). Booleans read
        true/false as PostgreSQL's #>> does, other scalars their text, an object or an array
        NULL. Over 5,000 bodies of 1.1 KB a page took 0.07 s against `json_extract`'s 0.014 s
        (one run, docs/dashboard.md)."""
        text = sa.cast(payloads.c.body, sa.Text)
        document: sa.ColumnElement[Any] = text
        for depth, segment in enumerate(match.path):
            member = sa.func.json_each(document).table_valued("key", "value", "type", "id")
            key = sa.bindparam(
                f"payload_key_{depth}",
                int(segment) if segment.isdigit() else segment,  # an array's keys are numbers
                type_=sa.Integer if segment.isdigit() else sa.Text,
            )
            last = member.c.key == key
            if depth < len(match.path) - 1:
                # Only an object or an array is walked into (json_each reads NULL as
                # nothing, and refuses a scalar's text).
                picked: sa.ColumnElement[Any] = sa.case(
                    (member.c.type.in_(["object", "array"]), member.c.value), else_=None
                )
            else:
                picked = sa.case(
                    (member.c.type.in_(["true", "false"]), member.c.type),
                    (member.c.type.in_(["object", "array", "null"]), None),
                    else_=sa.cast(member.c.value, sa.Text),
                )
            document = (
                sa.select(picked)
                .select_from(member)
                .where(last)
                .order_by(member.c.id.desc())
                .limit(1)
                .scalar_subquery()
            )
        return sa.case((sa.func.json_valid(text) == 1, document), else_=None)

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        from hookinbox._storage._types import UTCDateTime

        # SQLite keeps naive UTC text; julianday() reads it (and the bound start) as days.
        days = sa.func.julianday(column) - sa.func.julianday(sa.literal(start, UTCDateTime()))
        return sa.cast(days * 86400.0 / width.total_seconds(), sa.Integer)

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A row is bound as parameters, in process: no packet to fit."""

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Nothing asked: a body is bound as a parameter, in process (SQLite's own bound
        on a value, 1 GB unless compiled otherwise, is not checked here)."""

    def notify(self, connection: Connection, channel: str) -> None:
        """No LISTEN: SQLite workers poll (or `serve`'s datagram wakes its own worker)."""


# -- the upsert -------------------------------------------------------------------------------


class SQLiteUpsert(sqlite.Insert, Upsert):
    """SQLite's own `ON CONFLICT`, as the seam's `Upsert`."""

    inherit_cache = True


# -- group commit's statements ------------------------------------------------------------------

_MAX_ROWS = 2_000
"""The most rows in one upsert (11 values each, within SQLite's 32,766 variables): a
group-commit batch passes `max_rows` by up to one batched delivery's events, and is then
written in two statements of the same transaction."""

_LOG = (
    "INSERT INTO hookinbox_deliveries (received_at, source, event_id, duplicate, key_conflict) "
    "VALUES (?, ?, ?, ?, ?)"
)


_PAYLOAD = PAYLOAD_INSERT.format(marks="?, ?, ?")


@functools.lru_cache(maxsize=64)
def _upsert(rows: int) -> str:
    """The upsert of `rows` events as a multi-row VALUES list (one text per row count)."""
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, 0, ?, ?)"] * rows)
    return f"INSERT INTO hookinbox_events ({EVENT_COLUMNS}) VALUES {values}" + ON_CONFLICT.format(
        latest="MAX"
    )


def sqlite_time(value: datetime | None) -> str | None:
    """The text SQLAlchemy's SQLite DateTime writes (naive UTC, a four-digit year, always with
    microseconds), so rows from a batch sort and compare with every other row. `isoformat`
    rather than `strftime`: a third of the SQLite writer's CPU went to `strftime`."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    return value.isoformat(" ", "microseconds")[:26]  # less the "+00:00"
