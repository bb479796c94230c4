"""Column types that behave the same on every database hookinbox runs on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, LargeBinary, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from hookinbox._text import safe_text


class LongText(Text):
    """Text of any length: `TEXT` on SQLite and PostgreSQL, `LONGTEXT` on MariaDB, whose
    `TEXT` stops at 64 KiB (a payload or a header set can be longer).

    A type of hookinbox's own rather than a rule for every `Text`: the dialect's DDL hook
    then reaches hookinbox's columns only, never the tables of an application that shares
    the process (its `Text` stays the `TEXT` SQLAlchemy documents).
    """


class LongBinary(LargeBinary):
    """Bytes of any length (a body up to the size limit, 1 MiB by default): `BLOB` on SQLite,
    `bytea` on PostgreSQL, `LONGBLOB` on MariaDB (whose `BLOB` stops at 64 KiB). Scoped to
    hookinbox's columns as `LongText` is."""


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out.

    PostgreSQL stores `timestamptz`. SQLite has no time zones: values are stored as naive UTC
    text (`YYYY-MM-DD HH:MM:SS.ffffff`), which sorts and compares correctly as long as every
    value is UTC, which this type guarantees.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("hookinbox stores aware datetimes only")
        # SQLite's DATETIME writes the wall clock and drops the zone: in UTC, every value
        # sorts and compares with every other. PostgreSQL keeps timestamptz.
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class SafeText(TypeDecorator[str]):
    """Text written from untrusted strings (an error message, a destination's answer).

    Lone surrogates and NUL are escaped on the way in (`hookinbox._text.safe_text`): neither
    encodes as UTF-8 nor fits PostgreSQL text, and a value that cannot be written must not
    stop the write of the status beside it. The DDL is `LongText`'s.
    """

    impl = LongText
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else safe_text(value)
