"""The one place where driver errors become hookinbox errors.

What a driver's error means is read by the dialect of that driver (`ErrorReader`: its own
module in each dialect's package), registered here with its dialect (`read_errors_of`), and
asked in turn, each answering for its driver's errors only (`NOT_MINE` for the others). The
answers are pure functions of the error, read where it is caught: an engine that registers no
dialect's `handle_error` (Django's borrowed PostgreSQL and SQLite engines) gets the same
answers. What a dialect's `handle_error` learned while the connection was still usable is
marked on the driver's error (`mark_deadlock`, `name_unique_violation`) and read here first.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, Protocol

from sqlalchemy import exc

from hookinbox._errors import StoreUnavailable
from hookinbox._records import UniqueViolation

DEADLOCK_MARK = "hookinbox_deadlock"
"""Set on a driver's error by the dialect's error handler when the database chose the
transaction as a deadlock's victim and rolled it back whole (MariaDB's 1213): only then may a
transaction of hookinbox's own be run again (`Store.retry_deadlocks`)."""
UNIQUE_MARK = "hookinbox_unique"
"""Set on a driver's error by the dialect's error handler that named a unique violation's
table, columns and constraint (MariaDB's, asyncpg's): `unique_violation` reads it first."""


class NotMine(enum.Enum):
    """A reader's answer for an error of another driver than its own."""

    NOT_MINE = "not mine"


NOT_MINE: Final = NotMine.NOT_MINE


class ErrorReader(Protocol):
    """What one dialect reads in its driver's errors (each method is handed the driver's
    error, SQLAlchemy's `orig`)."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        """The violation `original` reports; None when it is this driver's error but no
        unique violation; `NOT_MINE` when it is another driver's."""
        ...

    def unavailable(self, original: BaseException) -> bool:
        """True when `original`, not an OperationalError, still means "the database cannot
        answer now" (a SQLite file that is damaged); False for anything else."""
        ...

    def detail(self, original: BaseException) -> str | None:
        """What the driver's message leaves out and an operator needs (sqlite3's extended
        result code), or None."""
        ...


class ReadsNothing:
    """An `ErrorReader` that claims no error: a dialect's reader overrides what it reads."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        return NOT_MINE

    def unavailable(self, original: BaseException) -> bool:
        return False

    def detail(self, original: BaseException) -> str | None:
        return None


_READERS: list[ErrorReader] = []


def read_errors_of(reader: ErrorReader) -> None:
    """Ask `reader` too (a dialect's, when the dialect is registered), after the others."""
    if not any(known is reader for known in _READERS):
        _READERS.append(reader)


def mark_deadlock(original: BaseException) -> None:
    """For a dialect: `original` (the driver's error) rolled its whole transaction back."""
    setattr(original, DEADLOCK_MARK, True)


def name_unique_violation(
    original: BaseException, table: str | None, columns: frozenset[str], constraint: str | None
) -> None:
    """For a dialect's error handler: `original` violated `constraint` on `table`'s
    `columns`, read while the connection could still be asked."""
    setattr(original, UNIQUE_MARK, (table, columns, constraint))


def is_deadlock(error: BaseException) -> bool:
    """True when `error`, or an error it was raised from, is a deadlock's victim as marked by
    the dialect (`StoreUnavailable` keeps the driver's error as its cause)."""
    seen: BaseException | None = error
    while seen is not None:
        original = getattr(seen, "orig", None)
        if getattr(original, DEADLOCK_MARK, False) or getattr(seen, DEADLOCK_MARK, False):
            return True
        seen = seen.__cause__
    return False


def is_unavailable(error: BaseException) -> bool:
    """True for errors that mean "the database cannot answer now", as opposed to bugs."""
    if isinstance(error, exc.TimeoutError):  # no pooled connection came free in time
        return True
    if isinstance(error, exc.DBAPIError):
        return (
            error.connection_invalidated
            or isinstance(error, exc.OperationalError | exc.InterfaceError)
            or (
                error.orig is not None
                and any(reader.unavailable(error.orig) for reader in _READERS)
            )
        )
    return False


@contextmanager
def translate_errors() -> Iterator[None]:
    """Re-raise unavailability as `StoreUnavailable` (cause kept); let anything else through."""
    try:
        yield
    except Exception as error:
        if is_unavailable(error):
            raise StoreUnavailable(_describe(error)) from error
        raise


def _describe(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    # A driver's message alone can mislead (sqlite3's "disk I/O error" for a write refused by
    # a read-only file): its reader adds what names the condition exactly.
    detail = next(filter(None, (reader.detail(original) for reader in _READERS)), None)
    if detail:
        first_line = f"{first_line} ({detail})"
    return f"database unavailable: {type(original).__name__}: {first_line}"[:300]


def unique_violation(error: BaseException) -> UniqueViolation | None:
    """The unique-constraint violation `error` reports, as the dialect that named it or the
    reader of its driver reads it; None for any other error."""
    if not isinstance(error, exc.IntegrityError):
        return None
    original = error.orig
    named = getattr(original, UNIQUE_MARK, None)  # by the dialect's error handler
    if named is not None:
        table, columns, constraint = named
        return UniqueViolation(table, columns, constraint)
    if original is None:
        return None
    for reader in _READERS:
        answer = reader.unique_violation(original)
        if answer is not NOT_MINE:
            return answer
    return None
