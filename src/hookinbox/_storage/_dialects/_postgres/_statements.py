"""PostgreSQL's statements: the upsert, group commit's one-statement batch, payload search on
jsonb (and what jsonb cannot read), time buckets and NOTIFY."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    ON_CONFLICT,
    Group,
    Row,
    delivery_error,
    delivery_status,
    headers_json,
)
from hookinbox._storage._dialects._base import Dialect, Upsert
from hookinbox._storage._payload_codec import stored_body, stored_headers
from hookinbox._storage._schema import events

if TYPE_CHECKING:
    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions


class PostgresStatements(Dialect):
    """The part of the dialect that answers for statements."""

    def insert(self, table: sa.TableClause) -> Upsert:
        return PostgresUpsert(table)

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        rows: list[dict[str, object]] = []
        log: list[dict[str, object]] = []
        bodies: list[bytes] = []
        offset = 1  # SQL's substring counts from 1
        for group in groups:
            first = group.first
            folded = len(group.members)
            body = stored_body(first)
            rows.append(
                {
                    "s": first.source,
                    "i": first.event_id,
                    "t": first.event_type,
                    "o": _iso(first.occurred_at),
                    "r": first.received_at.isoformat(),
                    "bo": offset,
                    "bn": len(body),
                    "h": stored_headers(first, headers_json(first.headers)),
                    "d": first.body_sha256,
                    "st": delivery_status(first),
                    "c": folded,
                    "l": group.last_delivery_at.isoformat(),
                    "e": delivery_error(first),
                }
            )
            bodies.append(body)
            offset += len(body)
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
        parameters = {"events": json.dumps([rows, log]), "bodies": b"".join(bodies)}
        result = connection.exec_driver_sql(_BATCH, parameters)
        return {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """Only bodies that start with `{` or `[` are read as JSON (form bodies, Twilio's or
        Slack's, start with a field name). PostgreSQL 15 has no cast to jsonb that fails
        softly, and jsonb refuses what Python's parser (every source's) accepts: the escape
        \\u0000 and lone surrogate escapes, the tokens NaN and Infinity (and an exponent past
        numeric's range), UTF-16 and UTF-32 text. `careful` casts a body only when patterns
        say jsonb will read it (bound parameters, like the path): 5,000 bodies of 1.5 KB took
        0.96 s to check against 0.14 s to search, so a search runs without the checks first
        and only a window holding such a body (the cast failed) is searched again with them
        (`Operator.list_events`)."""
        body = events.c.body
        text = sa.func.convert_from(body, "UTF8")

        def matches(value: sa.ColumnElement[str], pattern: str) -> sa.ColumnElement[bool]:
            return value.op("~")(sa.literal(pattern, sa.Text))

        def without(pattern: str, replacement: str) -> sa.ColumnElement[str]:
            return sa.func.regexp_replace(
                text, sa.literal(pattern, sa.Text), sa.literal(replacement, sa.Text), "g"
            )

        document = sa.cast(text, JSONB)
        found = document.op("#>>", return_type=sa.Text)(
            sa.bindparam("payload_path", list(match.path), type_=ARRAY(sa.Text))
        )
        first = sa.func.substring(body, 1, 1)
        looks_json = first.in_([sa.literal(b"{", sa.LargeBinary), sa.literal(b"[", sa.LargeBinary)])
        if not careful:
            return sa.case((looks_json, found), else_=None)
        lone_escape = sa.case(
            (matches(text, _SUSPECT_ESCAPE), matches(without(_ESCAPES_READ, ""), _SUSPECT_ESCAPE)),
            else_=False,
        )
        bare_token = sa.case(
            (matches(text, _SUSPECT_TOKEN), matches(without(_STRINGS, '""'), _SUSPECT_TOKEN)),
            else_=False,
        )
        has_nul = sa.func.position(sa.literal(_NUL_BYTE, sa.LargeBinary).op("IN")(body)) > 0
        # A CASE, whose branches PostgreSQL evaluates in order: no cast before its checks.
        return sa.case(
            (sa.not_(looks_json), None),
            (has_nul, None),
            (lone_escape, None),
            (bare_token, None),
            else_=found,
        )

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        from hookinbox._storage._types import UTCDateTime

        elapsed = sa.extract("epoch", column - sa.literal(start, UTCDateTime()))
        return sa.func.floor(elapsed / width.total_seconds())

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A row is sent as parameters, outside the statement's text: no packet to fit."""

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Nothing asked: a body is a parameter, outside the statement's text (bytea holds
        1 GB at most, a bound not checked here)."""

    def notify(self, connection: Connection, channel: str) -> None:
        connection.execute(sa.select(sa.func.pg_notify(channel, "")))


# -- the upsert -------------------------------------------------------------------------------


class PostgresUpsert(postgresql.Insert, Upsert):
    """PostgreSQL's own `ON CONFLICT`, as the seam's `Upsert`."""

    inherit_cache = True


# -- group commit's statement -------------------------------------------------------------------

# The batch travels as two parameters: the events and the delivery-log rows as one JSON text,
# and every body in one bytea (each event names its slice). One array parameter per column was
# the first form: psycopg builds an array literal in Python, escaping each element, which cost
# about 20 us of the writer's CPU per row, a third of a saturated server's writer thread
# (a body, headers' JSON and timestamps escaped character by character); a JSON text is
# written by the C encoder and read once by PostgreSQL, a bytea is copied as it stands.
_BATCH = f"""
WITH batch AS (
    SELECT b.s AS source, b.i AS event_id, b.t AS event_type, b.o AS occurred_at,
           b.r AS received_at, substring(%(bodies)s::bytea FROM b.bo FOR b.bn) AS body,
           b.h AS headers, b.d AS body_sha256, b.st AS status, b.c AS delivery_count,
           b.l AS last_delivery_at, b.e AS last_error
    FROM json_to_recordset(%(events)s::json -> 0) AS b(
        s varchar, i varchar, t varchar, o timestamptz, r timestamptz, bo int, bn int,
        h text, d varchar, st varchar, c int, l timestamptz, e text)
), upserted AS (
    INSERT INTO hookinbox_events ({EVENT_COLUMNS})
    SELECT source, event_id, event_type, occurred_at, received_at, body, headers, body_sha256,
           status, 0, 0, received_at, delivery_count, 0, last_delivery_at, last_error
    FROM batch
    {ON_CONFLICT.format(latest="GREATEST")}
), logged AS (
    INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict)
    SELECT u.source, u.event_id, l.r,
           NOT (l.p = 1 AND u.delivery_count = l.f AND u.received_via = 'webhook'),
           u.body_sha256 <> l.d AND u.received_via = 'webhook'
    FROM json_to_recordset(%(events)s::json -> 1)
         AS l(s varchar, i varchar, r timestamptz, p int, f int, d varchar)
    JOIN upserted u ON u.source = l.s AND u.event_id = l.i
)
SELECT id, source, event_id, delivery_count, body_sha256, status, received_via FROM upserted
"""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# -- what jsonb cannot read (payload search's careful form) ------------------------------------

_NUL_BYTE = b"\x00"
"""In no UTF-8 JSON text; in every UTF-16 or UTF-32 one ({ is ASCII)."""
_SUSPECT_ESCAPE = r"\\u(0000|[dD][89a-fA-F])"
_ESCAPES_READ = r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
"""An escaped backslash, or a surrogate pair: removed before looking for a lone escape."""
_SUSPECT_TOKEN = r"NaN|Infinity|[0-9][eE][-+]?[0-9]{6}"
_STRINGS = r'"([^"\\]|\\.)*"'
"""Every string literal: removed before looking for a token outside strings."""
