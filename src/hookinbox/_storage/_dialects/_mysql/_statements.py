"""MariaDB's statements: the upsert, group commit's batch within the packet, payload search
with `JSON_VALUE` (and the bodies it reads otherwise than Python), time buckets."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._errors import ConfigurationError
from hookinbox._storage._batch import (
    Group,
    Row,
)
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._mysql._batch import write_part
from hookinbox._storage._dialects._mysql._packet import (
    MIB,
    cut_to_packet,
    fitting_row,
    largest_body,
    packet_for,
    packet_of,
)
from hookinbox._storage._dialects._mysql._server import REQUIRED_CHARSET
from hookinbox._storage._dialects._mysql._upsert import MySQLUpsert
from hookinbox._storage._errors import translate_errors
from hookinbox._storage._schema import payloads
from hookinbox._storage._types import UTCDateTime

if TYPE_CHECKING:
    from hookinbox._model import NewDelivery
    from hookinbox._records import PayloadMatch
    from hookinbox._storage._transactions import Transactions


class MySQLStatements(Dialect):
    """The part of the dialect that answers for statements."""

    def insert(self, table: sa.TableClause) -> MySQLUpsert:
        return MySQLUpsert(table)

    def write_batch(
        self, connection: Connection, deliveries: Sequence[NewDelivery], groups: list[Group]
    ) -> dict[tuple[str, str], Row]:
        rows: dict[tuple[str, str], Row] = {}
        for part in cut_to_packet(groups, packet_of(connection)):
            rows.update(write_part(connection, deliveries, part))
        return rows

    def check_row_size(self, connection: Connection, delivery: NewDelivery) -> None:
        """A delivery stored with a statement of its own: refused with `BodyTooLarge` (413)
        if its row cannot fit the connection's packet, rather than sent for the server to
        drop the connection (503, for as long as the provider retries)."""
        fitting_row(Group([0], delivery, delivery.received_at), packet_of(connection))

    def check_body_limit(self, store: Transactions, max_body_size: int) -> None:
        """Refuse a body limit past what one statement carries on this server: its packet,
        read from a session (a lower one on some sessions is answered 413 per delivery)."""
        with translate_errors(), store.engine.connect() as connection:
            packet = packet_of(connection)
        if max_body_size > largest_body(packet):
            needed = packet_for(max_body_size)
            raise ConfigurationError(
                f"max_body_size is {max_body_size} bytes, but MariaDB's max_allowed_packet is "
                f"{packet} bytes, which carries a body of at most {largest_body(packet)} bytes in "
                "one statement (a body is sent escaped, up to twice its size): set "
                f"max_allowed_packet to at least {needed} ({-(-needed // MIB)}M) on the "
                "server, or lower max_body_size"
            )

    def payload_value(self, match: PayloadMatch, *, careful: bool = False) -> sa.ColumnElement[Any]:
        """`JSON_VALUE` reads NULL from a body that is not JSON (never an error: `careful`
        has nothing to add), from a JSON null, an object or an array (PostgreSQL's `#>>`
        gives the latter two as JSON text). The path is a bound parameter. An index reads an
        array's item only (MariaDB's `$.a[0]` would read `a` itself when it is no array). Of
        a repeated key it reads the first value: `payload_unsure` finds those bodies."""
        text = _body_text()
        path = sa.bindparam("payload_path", _json_path(match.path), type_=sa.Text)
        # As PostgreSQL's #>> does: booleans read true/false (JSON_VALUE says 1 and 0).
        extracted = sa.func.json_extract(text, path, type_=sa.Text)
        value = sa.case(
            (sa.func.json_type(extracted) == "BOOLEAN", extracted),
            else_=sa.func.json_value(text, path, type_=sa.Text),
        )
        arrays = [
            sa.func.json_type(
                sa.func.json_extract(
                    text,
                    sa.bindparam(
                        f"payload_list_{depth}", _json_path(match.path[:depth]), type_=sa.Text
                    ),
                )
            )
            == "ARRAY"
            for depth, segment in enumerate(match.path)
            if segment.isdigit()
        ]
        return sa.case((sa.and_(*arrays), value), else_=None) if arrays else value

    def payload_unsure(self, match: PayloadMatch) -> sa.ColumnElement[bool] | None:
        """A body in which a key of the path is repeated in its object (`{"a": 1, "a": 2}`):
        `JSON_VALUE` reads the first, Python's parser (a handler's) the last. `JSON_REMOVE`
        takes the first out: if the key is still there, it was repeated. A body that is not
        JSON reads NULL."""
        text = _body_text()
        repeated = []
        for depth, segment in enumerate(match.path, start=1):
            if segment.isdigit():
                continue  # an array's index: an item is never repeated
            path = sa.bindparam(
                f"payload_key_{depth}", _json_path(match.path[:depth]), type_=sa.Text
            )
            remaining = sa.func.json_remove(text, path)
            repeated.append(sa.func.json_contains_path(remaining, "one", path) == 1)
        return sa.or_(*repeated) if repeated else None

    def time_bucket(
        self, column: sa.ColumnElement[Any], start: datetime, width: timedelta
    ) -> sa.ColumnElement[Any]:
        elapsed = sa.func.timestampdiff(
            sa.literal_column("MICROSECOND"), sa.literal(start, UTCDateTime()), column
        )
        return sa.func.floor(elapsed / round(width.total_seconds() * 1_000_000))

    def notify(self, connection: Connection, channel: str) -> None:
        """No LISTEN: workers poll with a cheap due read (or `serve`'s datagram)."""


def _body_text() -> sa.ColumnElement[Any]:
    """The body as utf8mb4 text, for MariaDB's JSON functions."""
    return sa.func.convert(payloads.c.body.op("USING")(sa.literal_column(REQUIRED_CHARSET)))


def _json_path(segments: tuple[str, ...]) -> str:
    parts = [f"[{s}]" if s.isdigit() else '."' + s.replace('"', '\\"') + '"' for s in segments]
    return "$" + "".join(parts)
