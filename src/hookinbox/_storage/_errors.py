"""The one place where driver errors become hookinbox errors."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc

from hookinbox._errors import StoreUnavailable
from hookinbox._records import UniqueViolation

DEADLOCK_MARK = "hookinbox_deadlock"
"""Set on a driver's error by the dialect's error handler when the database chose the
transaction as a deadlock's victim and rolled it back whole (MariaDB's 1213): only then may a
transaction of hookinbox's own be run again (`Store.retry_deadlocks`)."""


def mark_deadlock(original: BaseException) -> None:
    """For a dialect: `original` (the driver's error) rolled its whole transaction back."""
    setattr(original, DEADLOCK_MARK, True)


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
            or _unreadable_sqlite_file(error.orig)
        )
    return False


SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26


def _unreadable_sqlite_file(original: BaseException | None) -> bool:
    """A SQLite file that is damaged or is not a database at all: sqlite3 raises a plain
    DatabaseError for it, yet nothing can be stored or read until an operator restores it."""
    code = getattr(original, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)


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
    # sqlite3's message alone can mislead: a write refused by a read-only or immutable file
    # reads "disk I/O error". Its extended code (SQLITE_IOERR_WRITE, SQLITE_FULL,
    # SQLITE_READONLY, ...) names the condition exactly.
    code_name = getattr(original, "sqlite_errorname", None)
    if code_name:
        first_line = f"{first_line} ({code_name})"
    return f"database unavailable: {type(original).__name__}: {first_line}"[:300]


_PG_KEY_DETAIL = re.compile(r"Key \((?P<columns>.+?)\)=")
_SQLITE_MESSAGE = re.compile(r"UNIQUE constraint failed: (?P<targets>.+)$")


def key_columns(detail: str | None) -> frozenset[str]:
    """The columns a PostgreSQL unique violation's DETAIL names ("Key (a, b)=(1, 2) ...")."""
    match = _PG_KEY_DETAIL.search(detail or "")
    return frozenset(c.strip() for c in match["columns"].split(",")) if match else frozenset()


def unique_violation(error: BaseException) -> UniqueViolation | None:
    """Read a unique-constraint violation out of psycopg's, sqlite3's, PyMySQL's or asyncpg's
    error (the last two named by their dialect when it happened), else None."""
    if not isinstance(error, exc.IntegrityError):
        return None
    original = error.orig
    named = getattr(original, "hookinbox_unique", None)  # read by the dialect (MariaDB)
    if named is not None:
        table, columns, constraint = named
        return UniqueViolation(table, columns, constraint)
    diag = getattr(original, "diag", None)
    if diag is not None:  # psycopg
        if getattr(original, "sqlstate", None) != "23505":
            return None
        columns = key_columns(diag.message_detail)
        return UniqueViolation(diag.table_name, columns, diag.constraint_name)
    match = _SQLITE_MESSAGE.search(str(original))
    if not match:
        return None
    targets = [t.strip() for t in match["targets"].split(",")]
    tables = {t.rpartition(".")[0] for t in targets}
    columns = frozenset(t.rpartition(".")[2] for t in targets)
    return UniqueViolation(tables.pop() if len(tables) == 1 else None, columns, None)
