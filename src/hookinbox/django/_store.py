"""`DjangoStore`: hookinbox's storage on Django's connection, in Django's transactions.

Every hookinbox transaction (the ingest insert, the worker's lease, claim and processed mark)
is a `transaction.atomic()` block on the Django database `using`. A handler's ORM writes go
through the same connection in the same block, so they commit with the processed mark or
roll back with it. Inside a caller's own `atomic()` the block nests as a savepoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.utils import InterfaceError, OperationalError
from sqlalchemy import Connection, event

from hookinbox._errors import ConfigurationError, HookinboxError, StoreUnavailable
from hookinbox._storage import LATEST_VERSION, Store, StoreOptions, translate_errors
from hookinbox.django._engine import django_engine

_SPOILED = (
    "a database error inside the handlers spoiled the transaction; wrap an ORM call whose "
    "error you catch in its own transaction.atomic()"
)


class TransactionBroken(HookinboxError):
    """A database error inside the handlers left Django's transaction unable to commit."""


class DjangoStore(Store):
    """A `Store` whose connections and transactions are Django's (database alias `using`)."""

    def __init__(self, using: str = DEFAULT_DB_ALIAS, options: StoreOptions | None = None) -> None:
        self.using = using
        engine = django_engine(using)
        event.listen(engine, "before_cursor_execute", self._refuse_spoiled_transaction)
        # Django's migrations create the tables (`manage.py migrate hookinbox`): only check.
        super().__init__(engine.url, options, auto_migrate=False, engine=engine)

    def _refuse_spoiled_transaction(self, *_args: Any) -> None:
        # An ORM query failed and its error was caught without an atomic() block of its own.
        # Django will roll back at the end of the block whatever happens next (and PostgreSQL
        # refuses every statement until then): say so at hookinbox's next statement, not with
        # the driver's "current transaction is aborted" or, on SQLite, a silent rollback.
        if connections[self.using].needs_rollback:
            raise TransactionBroken(_SPOILED)

    def owns_transactions(self) -> bool:
        # Inside an `atomic()` block of the application's (its own view storing a delivery
        # in one), hookinbox's transaction is a savepoint: a deadlock rolled the application's
        # writes back too, and running hookinbox's part again would commit it without them.
        return not connections[self.using].in_atomic_block

    def refuse_aborted(self, connection: Connection) -> None:
        self._refuse_spoiled_transaction()  # Django's own word for it, on any database
        super().refuse_aborted(connection)

    def ensure_schema(self) -> None:
        if not self._schema_ready:
            # The first connection first: a Django connection the dialect refuses (MariaDB's
            # isolation level or character set) says why in its own words, not as a version.
            with translate_errors(), self.engine.connect():
                pass
        try:
            super().ensure_schema()
        except ConfigurationError as error:
            if "newer than this hookinbox" in str(error):  # a migrate would not help
                raise ConfigurationError(
                    f"hookinbox's tables in Django database {self.using!r}: {error}"
                ) from error
            raise ConfigurationError(
                f"hookinbox's tables in Django database {self.using!r} are not at version "
                f"{LATEST_VERSION}: run `python manage.py migrate hookinbox`"
            ) from error

    def migrate(self, target: int = LATEST_VERSION) -> tuple[int, int]:
        with _django_errors(), transaction.atomic(using=self.using):
            return super().migrate(target)

    @contextmanager
    def housekeeping_transaction(self) -> Iterator[Connection]:
        """An ordinary transaction: Django owns its connection's settings and transactions
        (the store's own version changes SQLite's `synchronous` outside `atomic()`)."""
        with self.transaction() as connection:
            yield connection

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        django_connection = connections[self.using]
        outermost = not django_connection.in_atomic_block
        try:
            with _django_errors(), transaction.atomic(using=self.using):
                with super()._begin() as connection:
                    yield connection
                if django_connection.needs_rollback:  # spoiled after hookinbox's last statement
                    raise TransactionBroken(_SPOILED)
        except StoreUnavailable:
            if outermost:
                django_connection.close()  # perhaps broken: the next transaction reconnects
            raise


@contextmanager
def _django_errors() -> Iterator[None]:
    """Django's "database cannot answer" errors become StoreUnavailable (503, retry later)."""
    try:
        yield
    except (OperationalError, InterfaceError) as error:
        cause = error.__cause__ or error
        first_line = (str(cause).strip().splitlines() or [""])[0]
        raise StoreUnavailable(
            f"database unavailable: {type(cause).__name__}: {first_line}"[:300]
        ) from error
