"""The liveness gateway (`Store.liveness`): heartbeat rows written by each worker and relay
process, read by operators.

A beat is one short transaction: delete the rows that expired long ago (any process's), then
update this process's row, or insert it on the first beat (or after a prune took it while the
database was away). Readers count the rows not yet expired, by host and kind: an index range
on `expires_at`, cheap enough for every scrape and probe.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._records import Beat
from hookinbox._storage._schema import workers

if TYPE_CHECKING:
    from hookinbox._storage._store import Store

KEPT_AFTER_EXPIRY = timedelta(hours=1)
"""How long a dead process's row stays visible (the dashboard lists it) before it is pruned."""


class Liveness:
    def __init__(self, store: Store) -> None:
        self.store = store

    def beat(self, me: Beat, *, now: datetime, alive_for: timedelta) -> None:
        """Record that `me` is alive at `now`, and counts as alive for `alive_for` more."""
        expires_at = now + alive_for
        with self.store.transaction() as connection:
            connection.execute(
                workers.delete().where(workers.c.expires_at < now - KEPT_AFTER_EXPIRY)
            )
            updated = connection.execute(
                workers.update()
                .where(workers.c.id == me.worker_id)
                .values(last_beat_at=now, expires_at=expires_at)
            )
            if updated.rowcount == 0:
                connection.execute(
                    workers.insert().values(
                        id=me.worker_id, kind=me.kind, host=me.host, pid=me.pid,
                        started_at=me.started_at, last_beat_at=now, expires_at=expires_at,
                    )
                )  # fmt: skip

    def forget(self, worker_id: str) -> None:
        """A clean stop: the process is gone, not dead; its row goes with it."""
        with self.store.transaction() as connection:
            connection.execute(workers.delete().where(workers.c.id == worker_id))

    def live(self, connection: Connection, now: datetime) -> dict[tuple[str, str], int]:
        """(host, kind) -> processes whose heartbeat has not expired at `now`."""
        rows = connection.execute(
            sa.select(workers.c.host, workers.c.kind, sa.func.count())
            .where(workers.c.expires_at >= now)
            .group_by(workers.c.host, workers.c.kind)
        )
        return {(host, kind): int(count) for host, kind, count in rows}

    def rows(self, connection: Connection) -> list[dict[str, Any]]:
        """Every row, live or expired (not yet pruned), by host, then oldest started first."""
        query = sa.select(workers).order_by(workers.c.host, workers.c.started_at, workers.c.id)
        return [dict(row) for row in connection.execute(query).mappings()]
