"""Erasure (`Store.erasure`): delete events' bodies and headers, keeping everything else.

An event's body and headers are its `hookinbox_payloads` row (schema 14); erasing it deletes
that row, and nothing else: the dedupe key (source, event_id) and `body_sha256` stay in the
events row, with its status, times, attempts and the delivery log. Every reader reads an event
without a payload row as an empty body and no headers (`_payloads.payload_of`), and a
redelivery of the key is a duplicate as before (ingest writes a payload row only for an event
it creates), so it stores nothing again.

Each erasure writes one audit row per event (action `expunge`) in the transaction that deletes
its payload row, and only for a row it deletes: two erasures racing audit an event once.

The payload table is written once, at ingest, and never by a worker: deleting a row takes no
lock a worker holds (its claim locks the event's queue and events rows), so an erasure never
waits for one, and one never waits for an erasure. A worker processing the event read the
body when it took the event: that attempt goes on with it; a later attempt (a retry, a replay)
reads the empty body (docs/operations.md, "Erasing payloads").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa

from hookinbox._records import Actor, Selection
from hookinbox._storage._rows import EVENT_JOIN, EVENT_STATUS
from hookinbox._storage._schema import audit, events, payloads
from hookinbox._storage._types import SafeText, UTCDateTime

if TYPE_CHECKING:
    from hookinbox._storage._operator import Operator
    from hookinbox._storage._seam import StoreSeam

EXPUNGE = "expunge"
"""The audit row's action."""


class Erasure:
    def __init__(self, store: StoreSeam, operator: Operator) -> None:
        self.store = store
        self._operator = operator

    def find_one(self, source: str, event_id: str) -> tuple[int, bool] | None:
        """The event's row id and whether it still has a payload row; None when no such
        event is stored."""
        query = (
            sa.select(events.c.id, payloads.c.id.is_not(None).label("kept"))
            .select_from(events.outerjoin(payloads, payloads.c.id == events.c.id))
            .where(events.c.source == source, events.c.event_id == event_id)
        )
        with self.store.reading() as connection:
            row = connection.execute(query).first()
        return None if row is None else (int(row.id), bool(row.kept))

    def candidates(
        self, selection: Selection, *, after: int, batch_size: int
    ) -> tuple[list[int], list[int]]:
        """The next `batch_size` events of the selection's source after row id `after`
        (received before `selection.before`, if given), read without a lock: (the ids read,
        in order, those of them with a payload row that holds `selection.payload`, or any
        payload row without one). Empty ids read: none is left.

        Each batch reads at most `batch_size` events (the primary key's order), and the
        payload search runs over those ids only (`Operator.search_among`): the whole source
        is searched, a bounded batch at a time, not a window of the newest events."""
        source, before, payload = selection.source, selection.before, selection.payload
        query = sa.select(events.c.id).where(events.c.source == source, events.c.id > after)
        if before is not None:
            query = query.where(events.c.received_at < before)
        with self.store.reading() as connection:
            read = list(connection.execute(query.order_by(events.c.id).limit(batch_size)).scalars())
        if not read:
            return [], []
        if payload is not None:
            return read, sorted(self._operator.search_among(payload, read))
        kept = sa.select(payloads.c.id).where(payloads.c.id.in_(read)).order_by(payloads.c.id)
        with self.store.reading() as connection:
            return read, list(connection.execute(kept).scalars())

    def erase(self, ids: Sequence[int], now: datetime, actor: Actor) -> list[int]:
        """Delete the payload rows of `ids` (one short transaction), each audited; the ids
        whose row this deleted (a row already gone is neither deleted nor audited again)."""
        if not ids:
            return []
        with self.store.transaction() as connection:
            # Locks the payload rows only, never an event's: a second erasure of the same rows
            # waits here for the first and then finds them gone.
            present = list(
                connection.execute(
                    sa.select(payloads.c.id)
                    .where(payloads.c.id.in_(ids))
                    .order_by(payloads.c.id)
                    .with_for_update()
                ).scalars()
            )
            if not present:
                return []
            chosen = events.c.id.in_(present)
            rows = (
                sa.select(
                    events.c.source,
                    events.c.event_id,
                    sa.literal(now, UTCDateTime()),
                    sa.literal(EXPUNGE, sa.String()),
                    sa.literal(actor.who, sa.String()),
                    sa.literal(actor.reason, SafeText()),
                    EVENT_STATUS,
                    events.c.outcome,
                    events.c.attempts,
                )
                .select_from(EVENT_JOIN)
                .where(chosen)
            )
            names = [
                "source", "event_id", "at", "action", "actor", "reason",
                "previous_status", "previous_outcome", "previous_attempts",
            ]  # fmt: skip
            connection.execute(audit.insert().from_select(names, rows))
            connection.execute(payloads.delete().where(payloads.c.id.in_(present)))
        return present
