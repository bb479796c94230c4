"""Erasure by selection, paced: the payloads of every event of a source received before a
time, or whose body holds a value, deleted in batches that hold the writer briefly, with pauses
sized like the pruner's (`Pacer`). A selection that matches a million events erases them all,
never in one transaction, and never takes the database from deliveries and workers for long:
each batch reads at most `EXPUNGE_MAX_BATCH` events without a lock, then deletes the payload
rows of those that match by their primary key (`_storage/_erasure.py`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from hookinbox._operations._pacing import Pacer
from hookinbox._operations._replay import Gauges
from hookinbox._records import Actor, PayloadMatch

EXPUNGE_MAX_BATCH = 500
"""The most events one erasure batch reads, and so the most payload rows (and audit rows) one
transaction writes."""
EXPUNGE_FIRST_BATCH = 100


@dataclass(frozen=True, slots=True)
class Selection:
    """The events of `source` received before `before` (if given) whose body holds `payload`
    (if given)."""

    source: str
    before: datetime | None = None
    payload: PayloadMatch | None = None


class Erasing(Protocol):
    """The store's gateway a paced erasure uses (`Store.erasure`)."""

    def candidates(
        self,
        source: str,
        *,
        before: datetime | None,
        payload: PayloadMatch | None,
        after: int,
        batch_size: int,
    ) -> tuple[list[int], list[int]]: ...

    def erase(self, ids: Sequence[int], now: datetime, actor: Actor) -> list[int]: ...


def expunge_matching(
    erasure: Erasing,
    gauges: Gauges,
    selection: Selection,
    now: datetime,
    *,
    actor: Actor | None,
    pacer: Pacer | None = None,
) -> Iterator[int]:
    """Erase the payload of every event `selection` matches, batch by batch; yields each
    batch's count of payloads erased (with `actor` None, a dry run: the count of those that
    would be, nothing written). A batch with none to erase yields nothing."""
    pacer = pacer or Pacer(
        rows=EXPUNGE_FIRST_BATCH,
        min_rows=10,
        max_rows=EXPUNGE_MAX_BATCH,
        busy_batch_seconds=gauges.busy_batch_seconds,
    )
    gauge = gauges.pressure_gauge()
    after = 0
    try:
        gauge.mark()
        while True:
            pressure = gauge.sample()
            started = time.perf_counter()
            read, matched = erasure.candidates(
                selection.source,
                before=selection.before,
                payload=selection.payload,
                after=after,
                batch_size=pacer.rows,
            )
            if not read:
                return
            after = read[-1]
            erased = matched if actor is None else erasure.erase(matched, now, actor)
            took = time.perf_counter() - started
            gauge.mark()
            if erased:
                yield len(erased)
            if actor is not None:  # a dry run writes nothing: no pause owed to the writer
                time.sleep(pacer.next_pause(len(read), took, pressure))
    finally:
        gauge.close()
