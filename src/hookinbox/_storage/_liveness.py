"""The liveness gateway (`Store.liveness`): heartbeat rows written by each worker and relay
process, read by operators.

A beat is one short transaction: delete the rows that expired long ago (any process's), then
update this process's row, or insert it on the first beat (or after a prune took it while the
database was away). Readers count the rows not yet expired, by host and kind: an index range
on `expires_at`, cheap enough for every scrape and probe.

The database's clock decides, never the worker's or the reader's (`Dialect.now`): a worker
whose clock ran 2 h ahead deleted every other worker's live row as "expired long ago" and
counted as alive for 2 h after it was killed, and one 2 min behind was reported dead. On
PostgreSQL the time is the server's `now()`; SQLite is a file on this host, so every process
that opens it shares this host's clock already.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._records import Beat, WorkerGroup
from hookinbox._storage._schema import workers

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

KEPT_AFTER_EXPIRY = timedelta(hours=1)
"""How long a dead process's row stays visible (the dashboard lists it) before it is pruned."""


class Liveness:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def beat(self, me: Beat, *, alive_for: timedelta, now: datetime | None = None) -> None:
        """Record that `me` is alive now, and counts as alive for `alive_for` more.

        Now is the database's time; `now` (tests, tools) records a beat at another time
        instead. The row's start is the process's uptime by its own clock (right whatever its
        offset) before the database's time."""
        with self.store.transaction() as connection:
            clock = self.store.dialect.now(connection)
            at = clock if now is None else now
            started_at = clock - max(timedelta(0), datetime.now(UTC) - me.started_at)
            expires_at = at + alive_for
            connection.execute(
                workers.delete().where(workers.c.expires_at < clock - KEPT_AFTER_EXPIRY)
            )
            updated = connection.execute(
                workers.update()
                .where(workers.c.id == me.worker_id)
                .values(last_beat_at=at, expires_at=expires_at)
            )
            if updated.rowcount == 0:
                connection.execute(
                    workers.insert().values(
                        id=me.worker_id, kind=me.kind, host=me.host, pid=me.pid,
                        started_at=started_at, last_beat_at=at, expires_at=expires_at,
                    )
                )  # fmt: skip

    def forget(self, worker_id: str) -> None:
        """A clean stop: the process is gone, not dead; its row goes with it."""
        with self.store.transaction() as connection:
            connection.execute(workers.delete().where(workers.c.id == worker_id))

    def live(self, connection: Connection) -> dict[tuple[str, str], int]:
        """(host, kind) -> processes whose heartbeat has not expired by the database's clock."""
        rows = connection.execute(
            sa.select(workers.c.host, workers.c.kind, sa.func.count())
            .where(workers.c.expires_at >= self.store.dialect.now(connection))
            .group_by(workers.c.host, workers.c.kind)
        )
        return {(host, kind): int(count) for host, kind, count in rows}

    def rows(self, connection: Connection) -> list[dict[str, Any]]:
        """Every row, live or expired (not yet pruned), by host, then oldest started first."""
        query = sa.select(workers).order_by(workers.c.host, workers.c.started_at, workers.c.id)
        return [dict(row) for row in connection.execute(query).mappings()]

    def groups(self, connection: Connection, limit: int) -> list[WorkerGroup]:
        """Processes by host and kind, at most `limit` groups (hosts in order), alive by the
        database's clock: a crash loop's thousands of rows are one line."""
        alive = workers.c.expires_at >= self.store.dialect.now(connection)
        live_count = sa.func.sum(sa.case((alive, 1), else_=0))
        query = (
            sa.select(
                workers.c.host,
                workers.c.kind,
                live_count,
                sa.func.count() - live_count,
                sa.func.max(workers.c.last_beat_at),
                sa.func.min(sa.case((alive, workers.c.started_at), else_=None)),
            )
            .group_by(workers.c.host, workers.c.kind)
            .order_by(workers.c.host, workers.c.kind)
            .limit(limit)
        )
        return [
            WorkerGroup(host, kind, int(live), int(silent), last, since)
            for host, kind, live, silent, last, since in connection.execute(query)
        ]
