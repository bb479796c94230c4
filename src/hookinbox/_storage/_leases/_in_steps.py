"""Leasing in three steps: pick the due rows (`FOR UPDATE SKIP LOCKED`), write the lease to
them, read the items back. For a database with concurrent writers whose RETURNING cannot name
another table's columns (MariaDB)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._storage._leases._base import LeaseParts, Leasing, Rows


class InSteps(Leasing):
    def __init__(self, parts: LeaseParts) -> None:
        super().__init__(parts)
        ids: sa.BindParameter[list[int]] = sa.bindparam("ids", expanding=True)
        self.write = parts.write()
        self.read_back = parts.joined(
            sa.select(*parts.item_columns(), *parts.queue_columns(), *parts.also).where(
                parts.queue.c.id.in_(ids)
            )
        )

    def lease(self, connection: Connection, parameters: Mapping[str, Any]) -> Rows:
        picked = connection.execute(self.parts.candidates, parameters)
        previous = {row.id: row.previous for row in picked}
        if not previous:
            return []
        with_ids = {**parameters, "ids": list(previous)}
        connection.execute(self.write, with_ids)
        rows = connection.execute(self.read_back, with_ids).mappings()
        return [{**row, "previous": previous[row["id"]]} for row in rows]
