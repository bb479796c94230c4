"""Group commit's statements on MariaDB, counted before they are sent (issue 45, item 6): no
server here, the arithmetic only (tests/storage/test_mysql_packet.py and tests/reliability/
test_mariadb_packet.py hold it against real servers).

A statement carries its values as escaped literals; the server drops the connection when the
statement passes its `max_allowed_packet`. So each value's literal is counted at its worst, a
batch is cut into statements that fit the session's packet, and a row that cannot fit alone
is refused (413) instead of sent.
"""

from __future__ import annotations

import json

import pytest
from pymysql.converters import escape_item
from sqlalchemy.dialects import mysql

from hookinbox._errors import BodyTooLarge
from hookinbox._storage._batch import Group, upsert_parameters
from hookinbox._storage._dialects._mysql import MySQL
from hookinbox._storage._dialects._mysql._batch import mysql_time, upsert_sql
from hookinbox._storage._dialects._mysql._packet import (
    STATEMENT_BYTES,
    cut_to_packet,
    largest_body,
    literal_bytes,
    packet_for,
)
from hookinbox._storage._dialects._mysql._server import MIN_PACKET
from hookinbox._storage._ingest import upsert_statement
from tests.storage.test_deliveries import delivery

MIB = 1024 * 1024
HOSTILE: list[object] = [
    b"\\" * 1000,
    b"'\"\x00\n\r\x1a" * 100,
    bytes(range(256)) * 4,
    "\\'\"\x00" * 100,
    "caf\u00e9 \U0001f600 \u202e" * 50,
    json.dumps({"stripe-signature": 't=1,v1="x"\\'}),
    None,
    0,
    2**62,
    True,
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_literal_is_never_longer_than_counted(value: object) -> None:
    written = escape_item(value, "utf8mb4").encode("utf-8", "surrogateescape")
    assert len(written) <= literal_bytes(value)


def test_the_statements_text_is_small_beside_what_is_kept_for_it() -> None:
    single = str(upsert_statement(MySQL()).compile(dialect=mysql.dialect()))
    assert max(len(upsert_sql(1)), len(single)) < STATEMENT_BYTES // 4


def groups_of(*sizes: int) -> list[Group]:
    found = []
    for n, size in enumerate(sizes):
        one = delivery(event_id=f"evt_{n}", body=b"\\" * size)
        found.append(Group([n], one, one.received_at))
    return found


def statement_bytes(part: list[tuple[Group, list[object]]]) -> int:
    """What the statement of `part` takes as PyMySQL writes it."""
    values = [value for _, row in part for value in row]
    literals = sum(len(escape_item(v, "utf8mb4").encode()) for v in values)
    return len(upsert_sql(len(part))) + literals


def test_a_batch_is_cut_into_statements_the_packet_takes() -> None:
    """Before: up to 2 MiB of bodies went into one statement, 4 MiB and more once escaped:
    two 1 MiB bodies passed a 4 MiB packet."""
    parts = list(cut_to_packet(groups_of(*[MIB] * 6), MIN_PACKET))
    assert [len(part) for part in parts] == [1] * 6  # 1 MiB escaped is half the packet
    parts = list(cut_to_packet(groups_of(*[MIB // 4] * 12), MIN_PACKET))
    assert [len(part) for part in parts] == [7, 5]
    parts = list(cut_to_packet(groups_of(*[MIB] * 6), 16 * MIB))
    assert [len(part) for part in parts] == [6]
    for packet in (MIN_PACKET, 16 * MIB):
        for part in cut_to_packet(groups_of(*[MIB // 3] * 20), packet):
            assert statement_bytes(part) <= packet - 2  # the server's own bound, measured


def test_a_row_that_cannot_fit_alone_is_too_large_not_sent() -> None:
    groups = groups_of(largest_body(MIN_PACKET))  # a body as large as start-up accepts
    [[(_, values)]] = list(cut_to_packet(groups, MIN_PACKET))
    assert values == upsert_parameters(groups, mysql_time)
    with pytest.raises(BodyTooLarge, match="MariaDB's max_allowed_packet is 4194304 bytes"):
        list(cut_to_packet(groups_of(10, MIN_PACKET // 2), MIN_PACKET))


def test_the_packet_asked_for_carries_the_body_limit() -> None:
    for size in (1, MIB, 3 * MIB, 8 * MIB, 100 * MIB):
        assert largest_body(packet_for(size)) >= size > largest_body(packet_for(size) - 2)
