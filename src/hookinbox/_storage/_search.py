"""Payload search: events whose JSON body holds a value at a path, on both databases.

The path and the value are always bound parameters, never SQL text: the path is checked
(`parse_path`) to a few plain segments, and each dialect receives it as data (PostgreSQL a
text array for `#>>`, SQLite a JSON path string for `json_extract`). A body is read as JSON
only when it can be: SQLite asks `json_valid`; PostgreSQL 15 has no safe cast, so it reads
bodies that start with `{` or `[` (every stored JSON body passed its source's parser; form
bodies, Twilio's or Slack's, start with a field name). A search is bounded: it examines the
newest `SCAN_LIMIT` events that match the other filters, never the whole table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from hookinbox._storage._dialects import Dialect

MAX_SEGMENTS = 8
MAX_VALUE_LENGTH = 200
SCAN_LIMIT = 5000
"""Events examined per page of a payload search (the newest matching the other filters)."""
_SEGMENT = re.compile(r"[A-Za-z0-9_\-]{1,64}")


@dataclass(frozen=True, slots=True)
class PayloadMatch:
    """`path` (keys, or array indexes as digits) leads to a scalar whose text is `value`."""

    path: tuple[str, ...]
    value: str


def search_for(path: str, value: str) -> PayloadMatch:
    """A search from a form's fields; ValueError says what is wrong with them."""
    if len(value) > MAX_VALUE_LENGTH:
        raise ValueError(f"a payload value is at most {MAX_VALUE_LENGTH} characters")
    return PayloadMatch(parse_path(path), value)


def parse_path(text: str) -> tuple[str, ...]:
    """`data.object.customer` or `items.0.id` as segments; ValueError says what is wrong."""
    segments = tuple(text.strip().removeprefix("$.").split("."))
    if not 0 < len(segments) <= MAX_SEGMENTS:
        raise ValueError(f"a payload path has 1 to {MAX_SEGMENTS} segments")
    for segment in segments:
        if not _SEGMENT.fullmatch(segment):
            raise ValueError(
                f"payload path segment {segment[:70]!r}: letters, digits, _ and - only "
                "(1 to 64), separated by dots"
            )
    return segments


def payload_match(dialect: Dialect, match: PayloadMatch) -> sa.ColumnElement[bool]:
    """The WHERE clause for `match` in `dialect`."""
    return dialect.payload_value(match) == match.value
