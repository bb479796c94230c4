"""Paused sources (`Store.pausing`): pause and resume a source's processing, and park what a
lease took of a paused source.

A paused source's events keep being received and stored; none is processed until it is
resumed. The queue has no source column, so nothing on the lease's or the claim's statements
changes: each lease round reads the paused sources (a table of a handful of rows, usually
none) inside its own transaction, after it has taken its rows, and parks the rows it took of
a paused source (`park_leased`): their queue state becomes `paused`, which the due index does
not cover, their lease is cleared and the attempt the lease counted is given back. Whether any
source is paused is read by the lease's own statement (`ANY_PAUSED`: an uncorrelated EXISTS
on a table that is empty unless a source is paused, evaluated once); with none paused a lease
round sends no statement more, and nothing is done per event.

The guarantee (docs/operations.md, "Pausing a source"): once `pause` has returned, no attempt
at an event of the source starts (no claim commits) until `resume`; an attempt whose claim
came first ends as it would have (`pause` waits for its transaction). It holds because the
pause is two steps. First the source's row is committed: every lease whose statement reads
after that commit parks what it takes of the source. Then the source's open rows are parked
batch by batch, leased ones too, their tokens cleared. A lease that read before that commit
took rows committed before its read, so before the second step began: they are among the rows
it parks (PostgreSQL and MariaDB wait on the lease's row locks and read the rows as it left
them; SQLite runs one writer at a time), and their workers' claims, conditional on the token,
match nothing. A claim that came first holds the row until its transaction ends; the row is
then gone, or back in its queue state, and is parked. Both steps are safe to run again:
pausing a paused source parks whatever is left.

`resume` deletes the source's row first (what arrives from then on is processed at once), then
makes its parked rows due again batch by batch, each in the state its events row keeps
(pending or deferred) and at the time it was due. A resume cut short is finished by running it
again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import Connection

from hookinbox._model import WAITING_STATUSES, Status
from hookinbox._records import Actor, PauseChange, PausedSource
from hookinbox._storage._notify import CHANNEL
from hookinbox._storage._schema import audit, event_queue, events, paused_sources, status_is
from hookinbox._storage._types import SafeText, UTCDateTime

if TYPE_CHECKING:
    from hookinbox._storage._seam import StoreSeam

PAUSE = "pause"
RESUME = "resume"
WHOLE_SOURCE = "*"
"""The audit row's `event_id` for an action on a whole source (the column is NOT NULL)."""
ACTIVE = "active"
"""The audit row's `previous_status` of a pause of a source that was not paused."""

BATCH = 1000
"""Queue rows parked or made due per transaction: short transactions, never holding
SQLite's write lock or PostgreSQL's row locks for long."""

ANY_PAUSED = (
    sa.select(sa.literal(1)).select_from(paused_sources).exists().label("hookinbox_any_paused")
)
"""Read by the events' lease beside each row it takes, in its own statement: whether any
source is paused (true or false for all of them; the database evaluates it once)."""

_WAITING = tuple(s.value for s in WAITING_STATUSES)
_PAUSED = Status.PAUSED.value


class Pausing:
    def __init__(self, store: StoreSeam) -> None:
        self.store = store
        q = event_queue.c
        self._sources = sa.select(paused_sources.c.source)
        ids: sa.BindParameter[list[int]] = sa.bindparam("ids", expanding=True)
        now = sa.bindparam("now", type_=UTCDateTime())
        # Only rows still waiting: a row a claim deleted, or a worker failed meanwhile, is
        # left as it is. A live lease's attempt is given back (nothing of it ran); an expired
        # one's stays counted (its worker died in it).
        live_lease = sa.and_(q.lease_token.is_not(None), q.lease_expires_at >= now)
        self._park = (
            event_queue.update()
            .where(q.id.in_(ids), status_is(q.state, *_WAITING))
            .values(
                state=_PAUSED,
                lease_token=None,
                lease_expires_at=None,
                attempts=q.attempts - sa.case((live_lease, 1), else_=0),
            )
        )
        # A row whose lease had expired: counted when its dead worker leased it, and the
        # lease that found it counted none.
        self._park_expired = self._park.values(attempts=q.attempts)
        kept = (
            sa.select(events.c.status)
            .where(events.c.id == q.id, status_is(events.c.status, *_WAITING))
            .scalar_subquery()
        )
        self._unpark = (
            event_queue.update()
            .where(q.id.in_(ids), status_is(q.state, _PAUSED))
            .values(state=sa.func.coalesce(kept, Status.PENDING.value))
        )

    # -- the lease round's part ---------------------------------------------------------------

    def park_leased(
        self, connection: Connection, rows: Sequence[Mapping[Any, Any]], now: datetime
    ) -> list[Mapping[Any, Any]]:
        """Inside a lease's transaction, after it took `rows` (events with `source` and
        `previous`): park those of a paused source; the rows left to process. One read of
        the paused sources when rows were taken, nothing more while none is paused."""
        if not rows or not rows[0][ANY_PAUSED.name]:
            return list(rows)  # the usual case: no statement more
        paused = set(connection.execute(self._sources).scalars())
        if not paused:
            return list(rows)
        keep = [row for row in rows if row["source"] not in paused]
        parked = [row for row in rows if row["source"] in paused]
        if parked:
            # The lease counted an attempt for a fresh row, none for one whose lease had
            # expired: give back what it counted (`_park`'s rule reads the new lease as live).
            fresh = [row["id"] for row in parked if row["previous"] is None]
            expired = [row["id"] for row in parked if row["previous"] is not None]
            if fresh:
                connection.execute(self._park, {"ids": fresh, "now": now})
            if expired:
                connection.execute(self._park_expired, {"ids": expired, "now": now})
        return keep

    # -- reads --------------------------------------------------------------------------------

    def paused(self) -> list[PausedSource]:
        """The paused sources, by name."""
        query = sa.select(paused_sources).order_by(paused_sources.c.source)
        with self.store.reading() as connection:
            return [PausedSource(**row) for row in connection.execute(query).mappings()]

    def parked_count(self, connection: Connection, source: str | None = None) -> int:
        """Events parked (of `source`): the queue's open index, by state."""
        query = sa.select(sa.func.count()).select_from(event_queue)
        if source is not None:
            query = query.join(events, events.c.id == event_queue.c.id).where(
                events.c.source == source
            )
        query = query.where(status_is(event_queue.c.state, _PAUSED))
        return int(connection.execute(query).scalar_one())

    # -- the operator's actions ---------------------------------------------------------------

    def pause(self, source: str, now: datetime, actor: Actor) -> PauseChange:
        """Pause `source` (again is fine: what is left is parked); audited by `actor`."""
        with self.store.transaction() as connection:
            known = sa.select(paused_sources.c.source).where(paused_sources.c.source == source)
            was_paused = connection.execute(known).first() is not None
            if not was_paused:
                # Two pauses at once may both find no row: one inserts, the other's insert is
                # nothing (each writes its audit row).
                insert = self.store.dialect.insert(paused_sources).values(
                    source=source, paused_at=now, actor=actor.who, reason=actor.reason
                )
                connection.execute(
                    insert.on_conflict_do_nothing(index_elements=[paused_sources.c.source])
                )
            _audit(connection, source, now, PAUSE, actor, was_paused)
        parked = sum(self._park_open(source, now))
        return PauseChange(source, was_paused, parked)

    def _park_open(self, source: str, now: datetime) -> Iterator[int]:
        """Park every waiting queue row of `source`, leased or not, walking the queue by its
        primary key (it holds only unfinished work) joined to the events by theirs."""
        q = event_queue.c
        last = 0
        while True:
            with self.store.transaction() as connection:
                ids = list(
                    connection.execute(
                        sa.select(q.id)
                        .select_from(event_queue.join(events, events.c.id == q.id))
                        .where(
                            q.id > last, status_is(q.state, *_WAITING), events.c.source == source
                        )
                        .order_by(q.id)
                        .limit(BATCH)
                    ).scalars()
                )
                if not ids:
                    return
                yield connection.execute(self._park, {"ids": ids, "now": now}).rowcount
            last = ids[-1]

    def resume(self, source: str, now: datetime, actor: Actor) -> PauseChange:
        """Resume `source`: its row deleted, then its parked events due again, in batches.
        Audited when it was paused; a resume of a source that was not but has parked events
        (a resume cut short) makes them due and writes no audit row."""
        with self.store.transaction() as connection:
            deleted = connection.execute(
                paused_sources.delete().where(paused_sources.c.source == source)
            ).rowcount
            was_paused = deleted == 1
            if was_paused:
                _audit(connection, source, now, RESUME, actor, was_paused)
        resumed = sum(self._unpark_parked(source))
        return PauseChange(source, was_paused, resumed)

    def _unpark_parked(self, source: str) -> Iterator[int]:
        """The parked rows of `source`, read in the queue's open index (state, received_at),
        made due again batch by batch; the workers woken."""
        q = event_queue.c
        after: tuple[datetime, int] | None = None
        while True:
            with self.store.transaction() as connection:
                query = (
                    sa.select(q.id, q.received_at)
                    .select_from(event_queue.join(events, events.c.id == q.id))
                    .where(status_is(q.state, _PAUSED), events.c.source == source)
                    .order_by(q.received_at, q.id)
                    .limit(BATCH)
                )
                if after is not None:
                    query = query.where(
                        sa.or_(
                            q.received_at > after[0],
                            sa.and_(q.received_at == after[0], q.id > after[1]),
                        )
                    )
                found = connection.execute(query).all()
                if not found:
                    return
                ids = [row.id for row in found]
                count = connection.execute(self._unpark, {"ids": ids}).rowcount
                self.store.dialect.notify(connection, CHANNEL)
                yield count
            after = (found[-1].received_at, found[-1].id)


def _audit(
    connection: Connection,
    source: str,
    now: datetime,
    action: str,
    actor: Actor,
    was_paused: bool,
) -> None:
    """One audit row per pause or resume of a whole source: `event_id` is `*`, the previous
    status the source's (`active` or `paused`), no outcome, no attempts (0)."""
    connection.execute(
        audit.insert().values(
            source=source,
            event_id=WHOLE_SOURCE,
            at=now,
            action=action,
            actor=actor.who,
            reason=sa.literal(actor.reason, SafeText()),
            previous_status=_PAUSED if was_paused else ACTIVE,
            previous_outcome=None,
            previous_attempts=0,
        )
    )
