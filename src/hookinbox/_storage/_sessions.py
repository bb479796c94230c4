"""Dashboard sessions signed out on the server: the revocation rows the cookie check reads.

A session cookie is signed, not stored, so without this table a cookie copied before sign-out
would stay valid until it expires. Signing out inserts the session's id with the time its
cookie expires at the latest; every signed-in request looks its id up (a primary-key read).
Rows past their expiry are deleted on each sign-out: the table holds at most the sessions
signed out within one cookie lifetime.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from hookinbox._storage._schema import revoked_sessions
from hookinbox._storage._store import Store


def revoke_session(store: Store, session_id: str, *, expires_at: datetime, now: datetime) -> None:
    """Record `session_id` as signed out (again is fine) and forget expired revocations."""
    with store.transaction() as connection:
        connection.execute(revoked_sessions.delete().where(revoked_sessions.c.expires_at < now))
        known = sa.select(revoked_sessions.c.session_id).where(
            revoked_sessions.c.session_id == session_id
        )
        if connection.execute(known).first() is None:
            connection.execute(
                revoked_sessions.insert().values(session_id=session_id, expires_at=expires_at)
            )


def session_revoked(store: Store, session_id: str) -> bool:
    query = sa.select(revoked_sessions.c.session_id).where(
        revoked_sessions.c.session_id == session_id
    )
    with store.reading() as connection:
        return connection.execute(query).first() is not None
