"""An SQLAlchemy engine over Django's own connection, whose transactions Django drives.

hookinbox's queries are SQLAlchemy Core. To put them in the transaction of a handler's Django
ORM writes, they must run on the very DB-API connection Django uses in that thread, and commit
or roll back when `transaction.atomic()` says so. Hence:

- a pool without a pool (NullPool) whose `creator` returns the calling thread's Django
  connection: each checkout gets whatever connection Django holds now, even after Django
  closed and reopened it between requests;
- the storage dialects' "borrowed" SQLAlchemy dialects (`_storage/_dialects/_borrowed.py`),
  whose commit, rollback and close do nothing and which set nothing up per connection:
  Django's `atomic()` begins and ends the transaction, Django closes its connections. The
  Django backend picks the hookinbox dialect (`dialect_for_django`), like any other store.
"""

from __future__ import annotations

from django.db import DatabaseError, connections
from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import NullPool

from hookinbox._storage import HIDE_PARAMETERS, dialect_for_django


def django_url(alias: str) -> URL:
    """The database of Django's `alias` as a URL (the LISTEN connection dials it); a backend
    hookinbox does not support is refused in one line."""
    connection = connections[alias]
    return dialect_for_django(connection).borrowed_url(connection.settings_dict)


def django_engine(alias: str) -> Engine:
    """An engine whose every connection is the calling thread's Django connection `alias`."""

    def creator() -> DBAPIConnection:
        connection = connections[alias]
        try:
            connection.ensure_connection()
        except DatabaseError as error:
            # Django wraps the driver's error; SQLAlchemy recognises (and hookinbox translates)
            # the driver's own, so hand that on: "database down" becomes StoreUnavailable.
            raise (error.__cause__ or error) from None
        raw: DBAPIConnection = connection.connection
        return raw

    return create_engine(
        django_url(alias), creator=creator, poolclass=NullPool, hide_parameters=HIDE_PARAMETERS
    )
