"""A connection Django opened: SQLAlchemy's mysqlclient dialect on it, checked once, and
hookinbox's URL for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.mysql.mysqldb import MySQLDialect_mysqldb
from sqlalchemy.engine import URL

from hookinbox._errors import ConfigurationError
from hookinbox._storage._dialects._base import Dialect
from hookinbox._storage._dialects._borrowed import DRIVER as BORROWED
from hookinbox._storage._dialects._borrowed import OwnsNoTransactions
from hookinbox._storage._dialects._mysql._errors import classify
from hookinbox._storage._dialects._mysql._packet import PACKET
from hookinbox._storage._dialects._mysql._server import REQUIRED_CHARSET, check_server


class MySQLBorrowed(Dialect):
    """The part of the dialect that answers for Django's connections."""

    def borrowed_url(self, settings: Mapping[str, Any]) -> URL:
        """Django's MySQL backend (mysqlclient) as a name only: nothing dials it (no LISTEN),
        so Django's OPTIONS stay Django's. `mysql+`, never `mariadb+`: hookinbox's column
        types and table options are compiled for the dialect named `mysql`."""
        host = str(settings.get("HOST") or "")
        port = settings.get("PORT")
        return URL.create(
            f"mysql+{BORROWED}",
            username=settings.get("USER") or None,
            password=settings.get("PASSWORD") or None,
            host=None if host.startswith("/") else host or None,
            port=int(port) if port else None,
            database=settings.get("NAME") or None,
            query={"unix_socket": host} if host.startswith("/") else {},
        )


# -- a connection Django opened -----------------------------------------------------------------
# Django's MySQL backend opens the connection (mysqlclient) and sets it up itself: utf8mb4 and
# READ COMMITTED by default, and whatever DATABASES[...]["OPTIONS"] says. hookinbox changes
# nothing on it (the session is Django's, and Django's pool hands it out again and again), so
# the borrowed dialect checks once, at an engine's first connection, that Django's settings are
# ones hookinbox can run on, and refuses the others in one line. The session's time zone is
# left as Django has it: hookinbox's times are DATETIME(6) written and read as naive UTC by
# Python, and the server's clock is read with UTC_TIMESTAMP(): no statement depends on it.

ISOLATION = "READ COMMITTED"


class BorrowedMySQLDialect(OwnsNoTransactions, MySQLDialect_mysqldb):
    """SQLAlchemy's mysqlclient dialect on a connection whose transactions Django runs."""

    supports_statement_cache = True

    def initialize(self, connection: Connection) -> None:
        super().initialize(connection)
        version, connection_set, database_set, database, packet = connection.exec_driver_sql(
            "SELECT VERSION(), @@character_set_connection, @@character_set_database,"
            " DATABASE(), @@max_allowed_packet"
        ).one()
        if connection_set != REQUIRED_CHARSET:
            raise ConfigurationError(
                f"Django's MySQL connection speaks {connection_set}; hookinbox needs "
                f"{REQUIRED_CHARSET}: leave DATABASES[...]['OPTIONS']['charset'] out (Django's "
                f"default) or set it to '{REQUIRED_CHARSET}'"
            )
        check_server(str(version), str(connection_set), str(database_set), database, packet)
        setattr(self, PACKET, int(packet))  # each checkout is a new pool record: kept here
        driver_connection = connection.connection.dbapi_connection
        assert driver_connection is not None  # the first connection, just opened
        isolation = self.get_isolation_level(driver_connection)
        if isolation != ISOLATION:
            # hookinbox's own engine runs READ COMMITTED only: REPEATABLE READ's gap locks make
            # concurrent deliveries wait for each other and deadlock (docs/storage.md).
            raise ConfigurationError(
                f"Django's MySQL connection runs {isolation}; hookinbox needs {ISOLATION}: "
                "leave DATABASES[...]['OPTIONS']['isolation_level'] out (Django's default) or "
                "set it to 'read committed'"
            )

    @classmethod
    def engine_created(cls, engine: Engine) -> None:
        event.listen(engine, "handle_error", classify)


registry.register(f"mysql.{BORROWED}", __name__, "BorrowedMySQLDialect")
