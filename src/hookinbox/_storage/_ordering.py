"""The ordering guard's marks (`Store.ordering`): the newest position applied per object key."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from hookinbox._storage._schema import ordering

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam


class Ordering:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store

    def advance(
        self,
        connection: Connection,
        *,
        object_key: str,
        position: int,
        source: str,
        event_id: str,
        now: datetime,
    ) -> bool:
        """Record `position` for `object_key` unless a greater one is recorded; True if
        recorded.

        One upsert whose update only happens `WHERE stored position <= new position`:
        concurrent events for one object serialise on the row, and a rolled-back handler
        leaves no mark.
        """
        insert = self.store.dialect.insert(ordering)
        statement = insert.values(
            object_key=object_key,
            position=position,
            source=source,
            event_id=event_id,
            updated_at=now,
        ).on_conflict_do_update(
            index_elements=[ordering.c.object_key],
            set_={
                "position": insert.excluded.position,
                "source": insert.excluded.source,
                "event_id": insert.excluded.event_id,
                "updated_at": insert.excluded.updated_at,
            },
            where=ordering.c.position <= insert.excluded.position,
        )
        # The row as it stands after the statement: ours when recorded. (Where the database
        # returns the row the condition left unchanged, as MariaDB does, it is another's.)
        row = connection.execute(statement.returning(ordering.c.source, ordering.c.event_id))
        return row.first() in ((source, event_id),)
