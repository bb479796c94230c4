"""SQLAlchemy dialects on connections another framework opened and whose transactions it runs.

hookinbox's statements are SQLAlchemy Core. To put them in the transaction of a handler's
Django ORM writes, they must run on the very DB-API connection Django uses in that thread and
commit or roll back when `transaction.atomic()` says so: the dialects registered under the
driver name `DRIVER` (one per database, in its own module) do nothing on commit, rollback and
close, and set nothing up on connect (the framework's pool hands the same connection out again
and again). Savepoints are plain SQL and still work.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.engine.interfaces import DBAPIConnection

DRIVER = "hookinbox_django"


class OwnsNoTransactions:
    """Statements only: the framework commits and rolls back, and closes its connections."""

    def do_commit(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def do_rollback(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def do_close(self, dbapi_connection: DBAPIConnection) -> None:
        pass

    def on_connect(self) -> Callable[[DBAPIConnection], None]:
        return _no_setup


def _no_setup(_dbapi_connection: DBAPIConnection) -> None:
    pass
