"""Leasing in one statement: the due rows picked in a CTE feeding the update, whose RETURNING
names the items' columns through a second CTE. For a database whose data-modifying statement
can feed another and return its columns (PostgreSQL: `Dialect.returns_joined_rows`): one round
trip, the rows taken `FOR UPDATE SKIP LOCKED`, so concurrent workers take different ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._storage._leases._base import LeaseParts, Leasing, Rows


class OneStatement(Leasing):
    def __init__(self, parts: LeaseParts) -> None:
        super().__init__(parts)
        queue, items = parts.queue, parts.items
        picked = parts.candidates.cte("picked")
        returned = [queue.c.id, *parts.queue_columns(), picked.c.previous]
        update = queue.update().where(queue.c.id == picked.c.id).values(**parts.values())
        if not parts.separate:
            self.statement: sa.Executable = update.returning(*queue.c, *returned[1:], *parts.also)
            return
        leased = update.returning(*returned).cte("leased")
        joined = parts.attach(items.join(leased, items.c.id == leased.c.id))
        self.statement = sa.select(
            items,
            *parts.attached_columns(),
            *(leased.c[c.name] for c in returned[1:]),
            *parts.also,
        ).select_from(joined)

    def lease(self, connection: Connection, parameters: Mapping[str, Any]) -> Rows:
        return list(connection.execute(self.statement, parameters).mappings())
