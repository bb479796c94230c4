"""A throwaway schema's end: dropped even when a session still holds locks in it."""

from __future__ import annotations

import sqlalchemy as sa

SCRATCH_DROP_WAIT = "10s"
"""How long dropping a scratch schema waits for the locks on its tables before it ends the
sessions that hold them."""


def drop_scratch_schema(admin: sa.Engine, schema: str) -> None:
    """Drop a scratch schema, even when a session still holds locks on its tables (a test's
    worker that never returned, its transaction open): after `SCRATCH_DROP_WAIT`, the sessions
    holding locks in the schema are ended and the drop runs again. Only a throwaway schema is
    dropped this way; the sessions ended are the ones using it."""
    drop = sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    holders = sa.text(
        "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
        " JOIN pg_class c ON c.oid = l.relation"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = :schema AND l.pid <> pg_backend_pid()"
        " GROUP BY l.pid"
    )
    with admin.connect() as connection:
        connection.exec_driver_sql(f"SET lock_timeout = '{SCRATCH_DROP_WAIT}'")
        try:
            connection.execute(drop)
            return
        except sa.exc.OperationalError as error:
            if getattr(error.orig, "sqlstate", None) != "55P03":  # lock_not_available
                raise
        connection.execute(holders, {"schema": schema})
        connection.exec_driver_sql("SET lock_timeout = 0")
        connection.execute(drop)
