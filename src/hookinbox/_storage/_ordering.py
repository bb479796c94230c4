"""The ordering guard's one query: advance an object's high-water mark if not stale."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection

from hookinbox._storage._dialects import dialect_named
from hookinbox._storage._schema import ordering


def advance(
    connection: Connection,
    *,
    object_key: str,
    position: int,
    source: str,
    event_id: str,
    now: datetime,
) -> bool:
    """Record `position` for `object_key` unless a greater one is recorded; True if recorded.

    One upsert whose update only happens `WHERE stored position <= new position`: concurrent
    events for one object serialise on the row, and a rolled-back handler leaves no mark.
    """
    statement = (
        dialect_named(connection.dialect.name)
        .insert(ordering)
        .values(
            object_key=object_key,
            position=position,
            source=source,
            event_id=event_id,
            updated_at=now,
        )
    )
    statement = statement.on_conflict_do_update(
        index_elements=[ordering.c.object_key],
        set_={
            "position": statement.excluded.position,
            "source": statement.excluded.source,
            "event_id": statement.excluded.event_id,
            "updated_at": statement.excluded.updated_at,
        },
        where=ordering.c.position <= statement.excluded.position,
    )
    return connection.execute(statement.returning(ordering.c.object_key)).first() is not None
