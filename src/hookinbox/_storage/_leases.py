"""A leased queue over one table: the SQL that the event worker and the outbox relay share.

A row waits in one of its queue's waiting statuses until its `next_attempt_at`. `lease` moves
up to N due rows to the leased status, with a token, an expiry and `attempts + 1`, in **one
statement** that returns them (`UPDATE ... WHERE id IN (SELECT ... LIMIT n FOR UPDATE SKIP
LOCKED) RETURNING *`): concurrent workers on PostgreSQL take different rows without waiting;
on SQLite the write lock serialises them anyway. The lease is committed before any work
starts, so a row that kills its worker every time still runs out of attempts.

Every later write to a leased row is conditional on (id, token, leased status): a worker
whose lease was swept and handed to another matches nothing and changes nothing. `sweep`
gives back rows whose lease expired while still leased (their process died); on PostgreSQL a
row whose work is still running in an open transaction is row-locked and skipped.

The statuses are written into the SQL as constants (`status_is`): SQLite uses the queue's
partial indexes only when it can prove the query implies their WHERE.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._storage._schema import status_is
from hookinbox._storage._store import Store

DueAlso = Callable[[datetime], Sequence[sa.ColumnElement[bool]]]


def _nothing_more(_now: datetime) -> Sequence[sa.ColumnElement[bool]]:
    return ()


@dataclass(frozen=True, slots=True)
class LeasedQueue:
    """One table's queue: which statuses wait, which one is leased, and any further rule
    that makes a waiting row due (the outbox's ordering keys)."""

    table: sa.Table
    waiting: tuple[str, ...]
    leased: str
    due_also: DueAlso = field(default=_nothing_more)

    # -- reads (no write lock on SQLite) ------------------------------------------------------

    def due(self, now: datetime) -> list[sa.ColumnElement[bool]]:
        columns = self.table.c
        return [
            status_is(columns.status, *self.waiting),
            columns.next_attempt_at <= now,
            *self.due_also(now),
        ]

    def has_due(self, store: Store, now: datetime) -> bool:
        """A cheap read: is any row due? (Polling SQLite must not take its write lock.)"""
        query = sa.select(self.table.c.id).where(*self.due(now)).limit(1)
        with store.reading() as connection:
            return connection.execute(query).first() is not None

    def next_due_at(self, store: Store) -> datetime | None:
        """When the soonest waiting row becomes due (to sleep exactly that long)."""
        columns = self.table.c
        query = sa.select(sa.func.min(columns.next_attempt_at)).where(
            status_is(columns.status, *self.waiting)
        )
        with store.reading() as connection:
            value = connection.execute(query).scalar()
        return value if isinstance(value, datetime) else None

    # -- writes -------------------------------------------------------------------------------

    def lease(
        self, store: Store, *, limit: int, now: datetime, until: datetime
    ) -> tuple[str, list[sa.RowMapping]]:
        """Lease up to `limit` due rows, oldest due first, counting one attempt each: one
        statement, one short transaction. Returns the lease token and the rows as leased."""
        columns = self.table.c
        token = uuid.uuid4().hex
        candidates = (
            sa.select(columns.id)
            .where(*self.due(now))
            .order_by(columns.next_attempt_at, columns.id)
            .limit(limit)
            .with_for_update(skip_locked=True)  # PostgreSQL only; SQLite has one writer anyway
        )
        statement = (
            self.table.update()
            .where(columns.id.in_(candidates.scalar_subquery()))
            .values(
                status=self.leased,
                attempts=columns.attempts + 1,
                lease_token=token,
                lease_expires_at=until,
            )
            .returning(*self.table.c)
        )
        with store.transaction() as connection:
            rows = list(connection.execute(statement).mappings())
        # RETURNING keeps no order: back to the order they were picked in.
        rows.sort(key=lambda row: (row["next_attempt_at"], row["id"]))
        return token, rows

    def held(
        self, row_id: int | sa.BindParameter[int], token: str | sa.BindParameter[str]
    ) -> sa.ColumnElement[bool]:
        """The row, only while this lease holds it (values, or parameters bound later).

        Found by its primary key, always. The status is compared through `coalesce` (a no-op:
        the column is NOT NULL) so that no partial index on the status can serve the lookup:
        PostgreSQL, whose statistics say that hardly any row is leased, chose to read the
        whole leased (or open) index for each claim and filter it by id, and that index holds
        an entry for every event processed since the table was last vacuumed (bench/README.md,
        growth: processing at 10 million rows). SQLite finds the row by its rowid either way.
        """
        return sa.and_(
            self.table.c.id == row_id,
            self.table.c.lease_token == token,  # compared by the database, not by Python
            status_is(sa.func.coalesce(self.table.c.status, ""), self.leased),
        )

    def settle(
        self, connection: Connection, row_id: int, token: str, values: Mapping[str, Any]
    ) -> bool:
        """Write how the work ended, on the caller's connection, if the lease is still
        `token`'s; the lease columns are cleared. True when it was."""
        result = connection.execute(
            self.table.update()
            .where(self.held(row_id, token))
            .values(lease_token=None, lease_expires_at=None, **values)
        )
        return result.rowcount == 1

    def sweep(
        self,
        store: Store,
        *,
        now: datetime,
        decide: Callable[[sa.RowMapping], Mapping[str, Any]],
        limit: int = 100,
    ) -> list[sa.RowMapping]:
        """Give back rows whose lease expired while still leased: `decide` says how (the
        values to write). Returns the rows given back, as they were found."""
        columns = self.table.c
        expired = (
            sa.select(self.table)
            .where(status_is(columns.status, self.leased), columns.lease_expires_at < now)
            .order_by(columns.lease_expires_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        swept: list[sa.RowMapping] = []
        with store.transaction() as connection:
            for row in connection.execute(expired).mappings().all():
                if self.settle(connection, row["id"], row["lease_token"], decide(row)):
                    swept.append(row)
        return swept
