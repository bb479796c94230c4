"""What every way of leasing shares: the interface (`Leasing`) and a queue's parts of a lease
(`LeaseParts`: its tables, its due rows in the lease's order, what a lease writes)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

Rows = list[Mapping[Any, Any]]
"""Leased rows: the items' columns, `queue_attempts` and `queue_next_attempt_at` (the queue's
count and due time, as the lease left them) and `previous` (the token of an expired lease,
None for a row no one held)."""


@dataclass(frozen=True, slots=True)
class LeaseParts:
    """One queue's side of a lease, from which each way builds its statements."""

    queue: sa.Table
    """The rows of unfinished work (`id`, `next_attempt_at`, `attempts`, `lease_token`,
    `lease_expires_at`)."""
    items: sa.Table
    """The rows handed out; the queue table itself when they are one."""
    candidates: sa.Select[Any]
    """The due rows' ids and their previous tokens (`previous`), in the lease's order, at most
    `limit`, locked `SKIP LOCKED` where rows lock (parameters `now`, `limit`)."""
    attached: sa.Table | None = None
    """A table of the items' write-once columns, one row per item by `id` (the events'
    payloads), read beside each item; None when the items hold every column."""
    also: tuple[sa.Label[Any], ...] = ()
    """Columns read beside each leased item in the lease's own statements (the events' queue:
    whether any source is paused, an uncorrelated subquery the database evaluates once), so
    that asking costs no statement more."""

    @property
    def separate(self) -> bool:
        return self.queue is not self.items

    def values(self) -> dict[str, Any]:
        """What a lease writes: the token, the expiry and one more attempt (none for a row
        whose previous lease expired: its attempt was counted then); only columns no index
        covers (parameters `token`, `until`)."""
        q = self.queue.c
        return {
            "lease_token": sa.bindparam("token", type_=q.lease_token.type),
            "lease_expires_at": sa.bindparam("until", type_=q.lease_expires_at.type),
            "attempts": q.attempts + sa.case((q.lease_token.is_(None), 1), else_=0),
        }

    def queue_columns(self) -> list[sa.Label[Any]]:
        """The queue's count and due time, returned beside each item."""
        q = self.queue.c
        return [
            q.attempts.label("queue_attempts"),
            q.next_attempt_at.label("queue_next_attempt_at"),
        ]

    def item_columns(self) -> list[sa.Column[Any]]:
        """The items' columns, and the attached table's (less its `id`)."""
        return [*(self.items.c if self.separate else self.queue.c), *self.attached_columns()]

    def attached_columns(self) -> list[sa.Column[Any]]:
        if self.attached is None:
            return []
        return [c for c in self.attached.c if c.name != "id"]

    def attach(self, items: sa.FromClause) -> sa.FromClause:
        """`items` with their attached rows (an outer join: an item may have none)."""
        if self.attached is None:
            return items
        return items.outerjoin(self.attached, self.attached.c.id == self.items.c.id)

    def joined(self, query: sa.Select[Any]) -> sa.Select[Any]:
        """`query` reading the items joined to their queue rows (a separate queue table) and
        their attached rows."""
        if not self.separate:
            return query
        joined = self.queue.join(self.items, self.items.c.id == self.queue.c.id)
        return query.select_from(self.attach(joined))

    def write(self) -> sa.Update:
        """The lease written to the rows `ids` (an expanding parameter)."""
        ids: sa.BindParameter[list[int]] = sa.bindparam("ids", expanding=True)
        return self.queue.update().where(self.queue.c.id.in_(ids)).values(**self.values())


class Leasing(ABC):
    """One way of leasing a queue's due rows, with its statements built once, with bound
    parameters (`now`, `limit`, `token`, `until`): SQLAlchemy then finds each compiled in its
    cache without walking a newly built statement for its cache key on every lease (a tenth
    of a SQLite worker's CPU)."""

    def __init__(self, parts: LeaseParts) -> None:
        self.parts = parts

    @abstractmethod
    def lease(self, connection: Connection, parameters: Mapping[str, Any]) -> Rows:
        """Lease the due rows inside the lease's transaction on `connection`; the rows in any
        order."""
