"""What MariaDB's errors mean (PyMySQL's and mysqlclient's alike): the error codes hookinbox
reads, and the engine's error handler, which names a duplicate key while the connection can
still be asked."""

from __future__ import annotations

import contextlib
import re

from sqlalchemy.engine import ExceptionContext

from hookinbox._storage._errors import mark_deadlock, name_unique_violation

ER_LOCK_DEADLOCK = 1213
ER_DUP_ENTRY = 1062
ER_OPTION_PREVENTS_STATEMENT = 1290
"""The server runs with --read-only (a replica, or set by an operator)."""
ER_READ_ONLY_MODE = 1836
ABORTED = "hookinbox_aborted"
"""Set in a connection's `info` when a deadlock rolled its transaction back (`refuse_aborted`)."""

_WRITTEN_TABLE = re.compile(
    r"^\s*(?:INSERT|UPDATE|REPLACE)\s+(?:IGNORE\s+)?(?:INTO\s+)?`?(\w+)`?", re.I
)
_DUPLICATE_KEY = re.compile(r"for key '(?:[^']*\.)?([^']+)'")


def _name_the_key(context: ExceptionContext) -> None:
    """MariaDB's duplicate-key error names the index, not its table or columns: read them
    (the table from the statement, the columns from the catalog) for the business-key match
    (`unique_violation`), while the transaction is still usable (InnoDB undid the statement
    only)."""
    error = context.original_exception
    table = _WRITTEN_TABLE.match(context.statement or "")
    key = _DUPLICATE_KEY.search(str(getattr(error, "args", ("", ""))[-1]))
    if table is None or key is None or context.connection is None:
        return
    with contextlib.suppress(Exception):
        driver = context.connection.connection.dbapi_connection
        with driver.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(
                "SELECT column_name FROM information_schema.statistics WHERE table_schema ="
                " DATABASE() AND table_name = %s AND index_name = %s",
                (table[1], key[1]),
            )
            columns = frozenset(str(row[0]) for row in cursor.fetchall())
        name_unique_violation(error, table[1], columns, key[1])


def _code(error: BaseException | None) -> int | None:
    args = getattr(error, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


def classify(context: ExceptionContext) -> None:
    """What an error means to hookinbox, on its own engine and on Django's connection alike.

    A write refused because the server is read-only (a replica reached after a failover) is a
    lost connection: 503 and a new session (Django's store closes Django's), not a bug (500).
    A deadlock: InnoDB chose this transaction as the victim and rolled it back whole, so the
    error is marked (a transaction of hookinbox's own may run again at once:
    `Store.retry_deadlocks`; on Django's connection only outside the application's `atomic()`)
    and the transaction aborted (a handler's may not commit what followed: `refuse_aborted`;
    each checkout of the borrowed engine is a new pool record, so nothing is left over from
    an earlier transaction). A duplicate key is named for `business_key=`."""
    code = _code(context.original_exception)
    if code in (ER_OPTION_PREVENTS_STATEMENT, ER_READ_ONLY_MODE):
        context.is_disconnect = True
    elif code == ER_LOCK_DEADLOCK:
        mark_deadlock(context.original_exception)
        if context.connection is not None:
            with contextlib.suppress(Exception):
                context.connection.connection.info[ABORTED] = True
    elif code == ER_DUP_ENTRY and context.connection is not None:
        _name_the_key(context)
