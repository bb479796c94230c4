"""What psycopg's and asyncpg's errors mean: the SQLSTATEs hookinbox reads, the reader
`_errors.py` asks, and the engine's error handler."""

from __future__ import annotations

import contextlib
import re
import weakref

from sqlalchemy.engine import ExceptionContext

from hookinbox._records import UniqueViolation
from hookinbox._storage._errors import (
    NOT_MINE,
    NotMine,
    ReadsNothing,
    mark_deadlock,
    name_unique_violation,
)

READ_ONLY_SQL_TRANSACTION = "25006"
DEADLOCK_DETECTED = "40P01"
LOCK_NOT_AVAILABLE = "55P03"
"""The SQLSTATE of a lock wait that `lock_timeout` ended."""
UNIQUE_VIOLATION = "23505"
FAILED_STATEMENT = "hookinbox_failed_statement"
"""Set in a connection's `info` when a statement failed on the server in its transaction
(asyncpg, whose transaction state is private: `refuse_aborted`)."""

_KEY_DETAIL = re.compile(r"Key \((?P<columns>.+?)\)=")


def key_columns(detail: str | None) -> frozenset[str]:
    """The columns a unique violation's DETAIL names ("Key (a, b)=(1, 2) ...")."""
    match = _KEY_DETAIL.search(detail or "")
    return frozenset(c.strip() for c in match["columns"].split(",")) if match else frozenset()


class PostgresErrors(ReadsNothing):
    """What psycopg's errors mean (asyncpg's are named by the engine's error handler,
    `_name_unique_violation`, while its own error is at hand)."""

    def unique_violation(self, original: BaseException) -> UniqueViolation | NotMine | None:
        """psycopg's `diag` names the table and constraint, its DETAIL the columns."""
        diag = getattr(original, "diag", None)
        if diag is None:
            return NOT_MINE
        if getattr(original, "sqlstate", None) != UNIQUE_VIOLATION:
            return None
        columns = key_columns(diag.message_detail)
        return UniqueViolation(diag.table_name, columns, diag.constraint_name)


def classify(context: ExceptionContext, *, marks_failed_statements: bool) -> None:
    """What an error means to hookinbox, on hookinbox's own engines (`_engine.watch`): a
    standby's refusal is a lost connection, a deadlock's victim is marked, asyncpg's unique
    violation is named, and (asyncpg) the transaction a statement failed in is remembered."""
    original = context.original_exception
    sqlstate = getattr(original, "sqlstate", None)
    if sqlstate == READ_ONLY_SQL_TRANSACTION:
        # A write refused because the server is read-only: the session reached a standby
        # (a demoted primary that came back as one, or a URL without
        # target_session_attrs). Counted as a lost connection, the pool is dropped, new
        # sessions look for the primary, and the caller sees "unavailable" (503, retried)
        # rather than a bug (500).
        context.is_disconnect = True
    elif sqlstate == DEADLOCK_DETECTED and original is not None:
        # This session found the cycle and PostgreSQL aborted its transaction, nothing of
        # it kept: a transaction of hookinbox's own may run again (`retry_deadlocks`).
        mark_deadlock(original)
    elif sqlstate == UNIQUE_VIOLATION and original is not None:
        _name_unique_violation(original)
    connection = context.connection
    if marks_failed_statements and sqlstate is not None and connection is not None:
        # An error from the server aborts the transaction, or the savepoint it ran in,
        # until that ends: the innermost one is remembered for `refuse_aborted` on
        # asyncpg, which asks whether it is still active. (Not `begin` and
        # `rollback_savepoint` listeners clearing a flag: a connection event makes
        # SQLAlchemy dispatch events around every statement of the engine, which cost a
        # worker 15 % more CPU per event.)
        current = connection.get_nested_transaction() or connection.get_transaction()
        with contextlib.suppress(Exception):
            mark = weakref.ref(current) if current is not None else None
            connection.connection.info[FAILED_STATEMENT] = mark


def _name_unique_violation(original: BaseException) -> None:
    """asyncpg's violation, named for `unique_violation` as psycopg's `diag` names its own:
    SQLAlchemy's adapter raises it from asyncpg's error, which holds the names."""
    if getattr(original, "diag", None) is not None:
        return  # psycopg's: read from `diag` where it is caught
    cause = original.__cause__
    table = getattr(cause, "table_name", None)
    if cause is None or table is None:
        return
    columns = key_columns(getattr(cause, "detail", None))
    name_unique_violation(original, table, columns, getattr(cause, "constraint_name", None))
