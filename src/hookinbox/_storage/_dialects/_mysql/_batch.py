"""Group commit's statements on MariaDB: a multi-row VALUES upsert (`ON DUPLICATE KEY UPDATE
... RETURNING`), its delivery-log rows and the new events' payload rows, in the caller's
transaction."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from hookinbox._storage._batch import (
    EVENT_COLUMNS,
    Group,
    Row,
    log_rows,
    payload_rows,
)
from hookinbox._storage._payloads import PAYLOAD_INSERT

if TYPE_CHECKING:
    from hookinbox._model import NewDelivery

# -- group commit's statements ------------------------------------------------------------------

MAX_ROWS = 1_000


Part = list[tuple[Group, list[object]]]
"""A statement's groups, each with its row's values."""


def write_part(
    connection: Connection, deliveries: Sequence[NewDelivery], part: Part
) -> dict[tuple[str, str], Row]:
    groups = [group for group, _ in part]
    parameters = [value for _, values in part for value in values]
    result = connection.exec_driver_sql(upsert_sql(len(groups)), tuple(parameters))
    rows = {(r[1], r[2]): (r[0], r[3], r[4], r[5], r[6] == "webhook") for r in result}
    connection.exec_driver_sql(_LOG, log_rows(deliveries, groups, rows, mysql_time))
    # The part was cut to carry its bodies in the upsert's packet (`cut_to_packet`): they now
    # travel in this statement instead, which fits the same packet.
    if payloads := payload_rows(groups, rows):
        connection.exec_driver_sql(_PAYLOAD, payloads)
    return rows


_LOG = (
    "INSERT INTO hookinbox_deliveries (received_at, source, event_id, duplicate, key_conflict) "
    "VALUES (%s, %s, %s, %s, %s)"
)

_PAYLOAD = PAYLOAD_INSERT.format(marks="%s, %s, %s")

_ON_DUPLICATE = """
ON DUPLICATE KEY UPDATE
    key_conflicts = key_conflicts + CASE
        WHEN body_sha256 <> VALUES(body_sha256) AND received_via = 'webhook'
        THEN VALUES(delivery_count) ELSE 0 END,
    delivery_count = delivery_count + VALUES(delivery_count),
    last_delivery_at = GREATEST(last_delivery_at, VALUES(last_delivery_at))
RETURNING id, source, event_id, delivery_count, body_sha256, status, received_via
"""
# An event reconcile stored counted no delivery, and its body (the API's JSON) conflicts
# with no delivery's: as the other dialects' batch statements (`_batch.py`).


_ROW = "(%s, %s, %s, %s, %s, %s, %s, 0, 0, %s, %s, 0, %s, %s)"
ROW_SYNTAX = len(_ROW) + 2
"""A row's bytes in the statement besides its values (its placeholders counted: more)."""


@functools.lru_cache(maxsize=64)
def upsert_sql(rows: int) -> str:
    values = ", ".join([_ROW] * rows)
    return f"INSERT INTO hookinbox_events ({EVENT_COLUMNS}) VALUES {values}" + _ON_DUPLICATE


def mysql_time(value: datetime | None) -> datetime | None:
    """A naive UTC datetime: PyMySQL writes the wall clock and drops the zone."""
    return None if value is None else value.astimezone(UTC).replace(tzinfo=None)
