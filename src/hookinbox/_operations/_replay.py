"""Replay by filter, paced: every event a filter matches back to pending, in batches that hold
the writer briefly, with pauses sized like the pruner's (`Pacer`) while others use the
database. A filter that matches a million events replays them all, never in one transaction,
and never takes the database from deliveries and workers for long.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
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
    after = 0

    def batch(rows: int) -> tuple[int, int]:
        nonlocal after
        read, replayed = operator.replay_batch(
            filters, now, actor=actor, after=after, batch_size=rows
        )
        after = read[-1] if read else after
        return len(read), len(replayed)

    return paced_batches(gauges, batch, pacer or _pacer(gauges, REPLAY_FIRST_BATCH))


def _pacer(gauges: Gauges, first: int) -> Pacer:
    return Pacer(
        rows=first, min_rows=10, max_rows=REPLAY_MAX_BATCH,
        busy_batch_seconds=gauges.busy_batch_seconds,
    )  # fmt: skip


def paced_batches(
    gauges: Gauges, batch: Callable[[int], tuple[int, int]], pacer: Pacer, *, pause: bool = True
) -> Iterator[int]:
    """Run `batch(rows)` (which answers how many rows it read and how many it changed) until
    it reads none, pausing after each as `pacer` says from its time and what else the database
    did meanwhile (no pause without `pause`: a dry run writes nothing); yields each batch's
    count of rows changed, when any."""
    gauge = gauges.pressure_gauge()
    try:
        gauge.mark()
        while True:
            pressure = gauge.sample()
            started = time.perf_counter()
            read, changed = batch(pacer.rows)
            took = time.perf_counter() - started
            gauge.mark()
            if not read:
                return
            if changed:
                yield changed
            wait = pacer.next_pause(read, took, pressure)  # sizes the next batch too
            if pause:
                time.sleep(wait)
    finally:
        gauge.close()
