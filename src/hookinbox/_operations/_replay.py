"""Replay by filter, paced: every event a filter matches back to pending, in batches that hold
the writer briefly, with pauses sized like the pruner's (`Pacer`) while others use the
database. A filter that matches a million events replays them all, never in one transaction,
and never takes the database from deliveries and workers for long.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Protocol

from hookinbox._operations._pacing import Pacer
from hookinbox._records import Actor, EventFilter
from hookinbox._storage import PressureGauge

REPLAY_MAX_BATCH = 500
"""The most events one replay transaction changes (an audit row, the event and its queue row
each): what a batch may grow to on an idle database."""
REPLAY_FIRST_BATCH = 100


class Replaying(Protocol):
    """The store's gateways a paced replay uses (`Store.operator`, `Store.housekeeping`)."""

    def replay_batch(
        self, filters: EventFilter, now: datetime, *, actor: Actor, after: int, batch_size: int
    ) -> tuple[list[int], list[int]]: ...


class Gauges(Protocol):
    @property
    def busy_batch_seconds(self) -> float: ...

    def pressure_gauge(self) -> PressureGauge: ...


def replay_matching(
    operator: Replaying,
    gauges: Gauges,
    filters: EventFilter,
    now: datetime,
    *,
    actor: Actor,
    pacer: Pacer | None = None,
) -> Iterator[int]:
    """Replay every event matching `filters`, batch by batch; yields each batch's count of
    events replayed (a batch whose events all stopped matching yields nothing)."""
    pacer = pacer or Pacer(
        rows=REPLAY_FIRST_BATCH,
        min_rows=10,
        max_rows=REPLAY_MAX_BATCH,
        busy_batch_seconds=gauges.busy_batch_seconds,
    )
    gauge = gauges.pressure_gauge()
    after = 0
    try:
        gauge.mark()
        while True:
            pressure = gauge.sample()
            started = time.perf_counter()
            read, replayed = operator.replay_batch(
                filters, now, actor=actor, after=after, batch_size=pacer.rows
            )
            took = time.perf_counter() - started
            gauge.mark()
            if not read:
                return
            after = read[-1]
            if replayed:
                yield len(replayed)
            time.sleep(pacer.next_pause(len(read), took, pressure))
    finally:
        gauge.close()
