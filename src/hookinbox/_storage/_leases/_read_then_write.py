"""Leasing by a read and a write: the due items with their queue columns, then the lease
written to them. For a database where one writer at a time holds it (SQLite: the lease's
transaction began holding the write lock, so nothing changes between the two statements):
one statement fewer than `_in_steps.py` on the worker's hot path, which SQLite's drain rate is
made of."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from hookinbox._storage._leases._base import LeaseParts, Leasing, Rows


class ReadThenWrite(Leasing):
    def __init__(self, parts: LeaseParts) -> None:
        super().__init__(parts)
        previous = parts.queue.c.lease_token.label("previous")
        self.read = parts.joined(
            parts.candidates.with_only_columns(
                *parts.item_columns(),
                previous,
                *parts.queue_columns(),
                *parts.also,
                maintain_column_froms=False,
            )
        )
        self.write = parts.write()

    def lease(self, connection: Connection, parameters: Mapping[str, Any]) -> Rows:
        found = connection.execute(self.read, parameters).mappings().all()
        if not found:
            return []
        ids = [row["id"] for row in found]
        connection.execute(self.write, {**parameters, "ids": ids})
        token, until = parameters["token"], parameters["until"]
        rows: Rows = []
        for row in found:  # as the update left them: one more attempt unless it expired
            attempts = row["queue_attempts"] + (1 if row["previous"] is None else 0)
            leased: dict[Any, Any] = {**row, "queue_attempts": attempts}
            if not self.parts.separate:
                leased.update(attempts=attempts, lease_token=token, lease_expires_at=until)
            rows.append(leased)
        return rows
