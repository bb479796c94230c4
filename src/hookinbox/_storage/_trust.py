"""The trust gateway (`Store.trust`): secrets a source learns on first use, and the windows
in which it may.

A provider whose first request hands over its secret (Asana's `X-Hook-Secret`) is believed
only while an operator has a window open for that source (`open_window`, `hookinbox trust`):
`learn` takes the window and keeps the secret in one transaction, so of two handshakes racing
in two processes exactly one is believed, and the window is closed by it. The secrets are read
by every HTTP process when a delivery's signature matches none they know (`secrets`).

The database's clock decides whether a window is open (`Dialect.now`), as for the workers'
heartbeats: the process that opened it and the one that answers the handshake need not agree.
The secrets are stored as given: they are HMAC keys, needed as they are to verify.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import sqlalchemy as sa

from hookinbox._storage._schema import learned_secrets, trust_windows

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

MAX_LEARNED = 16
"""The most secrets one source keeps: each is another HMAC per delivery that matches none of
the others, as a rotation's secrets are (`MAX_SIGNATURES`)."""


class Trust:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def open_window(self, source: str, length: timedelta) -> datetime:
        """Believe the next first handshake of `source` for `length` from now; when it closes."""
        with self.store.transaction() as connection:
            closes_at = self.store.dialect.now(connection) + length
            connection.execute(trust_windows.delete().where(trust_windows.c.source == source))
            connection.execute(trust_windows.insert().values(source=source, closes_at=closes_at))
        return closes_at

    def close_window(self, source: str) -> bool:
        """Close `source`'s window; whether one was open."""
        with self.store.transaction() as connection:
            now = self.store.dialect.now(connection)
            closed = connection.execute(
                trust_windows.delete().where(
                    trust_windows.c.source == source, trust_windows.c.closes_at > now
                )
            )
        return bool(closed.rowcount)

    def learn(self, source: str, secret: str) -> bool:
        """Keep `secret` for `source` if its window is open (and close it); False otherwise,
        or when the source keeps `MAX_LEARNED` secrets already."""
        with self.store.transaction() as connection:
            now = self.store.dialect.now(connection)
            taken = connection.execute(
                trust_windows.delete().where(
                    trust_windows.c.source == source, trust_windows.c.closes_at > now
                )
            )
            if not taken.rowcount:
                return False
            mine = learned_secrets.c.source == source
            count = sa.select(sa.func.count()).select_from(learned_secrets)
            if connection.execute(count.where(mine, learned_secrets.c.secret == secret)).scalar():
                return True  # the same handshake again: believed once already
            if (connection.execute(count.where(mine)).scalar() or 0) >= MAX_LEARNED:
                return False
            connection.execute(
                learned_secrets.insert().values(source=source, secret=secret, learned_at=now)
            )
        return True

    def secrets(self, source: str) -> list[str]:
        """The secrets `source` learned, oldest first."""
        with self.store.reading() as connection:
            rows = connection.execute(
                sa.select(learned_secrets.c.secret)
                .where(learned_secrets.c.source == source)
                .order_by(learned_secrets.c.learned_at)
            )
            return list(rows.scalars())

    def forget(self, source: str) -> int:
        """Drop every secret `source` learned (its webhooks were deleted); how many."""
        with self.store.transaction() as connection:
            gone = connection.execute(
                learned_secrets.delete().where(learned_secrets.c.source == source)
            )
        return int(gone.rowcount)
