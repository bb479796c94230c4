"""Statements cut to the session's `max_allowed_packet`: every value counted escaped, at
worst; a row that cannot fit alone is `BodyTooLarge` (413), never sent."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import Connection

from hookinbox._errors import BodyTooLarge
from hookinbox._storage._batch import (
    Group,
    upsert_parameters,
)
from hookinbox._storage._dialects._mysql._batch import MAX_ROWS, ROW_SYNTAX, Part, mysql_time
from hookinbox._storage._dialects._mysql._server import MIN_PACKET
from hookinbox._storage._payloads import stored_payload

STATEMENT_BYTES = 8 * 1024
"""Bytes of a packet kept for a statement's own text around its rows' values (group commit's
upsert, or a single delivery's as SQLAlchemy writes it: each under 2 KiB) and the command's
header."""
ROW_ALLOWANCE = 64 * 1024
"""Bytes a row may take besides its body when the body limit is checked at start: the headers
a source keeps, the event's id and type, its times, an invalid event's reason. A row's real
size is counted when it is written."""
QUOTES = 16
"""A binary literal's bytes around its escaped bytes (`X'...'`, `_binary'...'`)."""
MIB = 1024 * 1024
PACKET = "hookinbox_max_allowed_packet"
"""The connection's `max_allowed_packet`, as the server said when the session opened."""


def largest_body(packet: int) -> int:
    """The largest body one statement carries alone on a server whose `max_allowed_packet` is
    `packet`: every byte escaped to two (PyMySQL sends each as two hex digits; mysqlclient,
    Django's driver, doubles a backslash or a quote), beside `ROW_ALLOWANCE` bytes of the
    rest of its row and the statement's own text."""
    return (packet - STATEMENT_BYTES - ROW_ALLOWANCE - QUOTES) // 2


def packet_for(body_size: int) -> int:
    """The smallest `max_allowed_packet` whose statements carry a body of `body_size`."""
    return 2 * body_size + QUOTES + ROW_ALLOWANCE + STATEMENT_BYTES


def packet_of(connection: Connection) -> int:
    """The session's `max_allowed_packet`: read when hookinbox's engine opened it; on Django's
    connection, when the engine first connected; else the least hookinbox accepts."""
    packet = connection.connection.info.get(PACKET, getattr(connection.dialect, PACKET, None))
    return packet if isinstance(packet, int) else MIN_PACKET


def literal_bytes(value: object) -> int:
    """The most bytes `value` takes as a literal in a statement, escaped."""
    if value is None:
        return 4
    if isinstance(value, bytes | bytearray):
        return 2 * len(value) + QUOTES
    if isinstance(value, str):
        size = len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        return 2 * size + 2
    return 32  # a number, a flag, a time


def cut_to_packet(groups: list[Group], packet: int) -> Iterator[Part]:
    """The groups cut so that each statement, its values escaped at worst, fits `packet`: a
    group's row that cannot fit even alone is `BodyTooLarge` (a 413, never sent)."""
    room = packet - STATEMENT_BYTES
    part: Part = []
    size = 0
    for group in groups:
        values, row = fitting_row(group, packet)
        if part and (size + row > room or len(part) >= MAX_ROWS):
            yield part
            part, size = [], 0
        part.append((group, values))
        size += row
    if part:
        yield part


def fitting_row(group: Group, packet: int) -> tuple[list[object], int]:
    """The group's row of values and its most bytes in a statement, counting its payload row
    (sent in a statement of its own since schema 14: a part cut by these sizes fits the
    packet in either); `BodyTooLarge` if a statement of that row alone would pass `packet`."""
    values = upsert_parameters([group], mysql_time)
    payload = stored_payload(group.first)
    size = ROW_SYNTAX + sum(map(literal_bytes, values)) + sum(map(literal_bytes, payload))
    if size > packet - STATEMENT_BYTES:
        raise BodyTooLarge(
            f"body of {len(group.first.body)} bytes: more than the database takes in one "
            f"statement ({largest_body(packet)} bytes at most: MariaDB's max_allowed_packet "
            f"is {packet} bytes)"
        )
    return values, size
