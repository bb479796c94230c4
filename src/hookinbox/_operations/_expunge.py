"""Erasure by selection, paced: the payloads of every event of a source received before a
time, or whose body holds a value, deleted in batches that hold the writer briefly, with pauses
sized like the pruner's (`Pacer`). A selection that matches a million events erases them all,
never in one transaction, and never takes the database from deliveries and workers for long:
each batch reads at most `EXPUNGE_MAX_BATCH` events without a lock, then deletes the payload
rows of those that match by their primary key (`_storage/_erasure.py`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Protocol

from hookinbox._operations._pacing import Pacer
from hookinbox._operations._replay import Gauges, paced_batches
from hookinbox._records import Actor, Selection

EXPUNGE_MAX_BATCH = 500
"""The most events one erasure batch reads, and so the most payload rows (and audit rows) one
transaction writes."""
EXPUNGE_FIRST_BATCH = 100


class Erasing(Protocol):
    """The store's gateway a paced erasure uses (`Store.erasure`)."""

    def candidates(
        self, selection: Selection, *, after: int, batch_size: int
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
    after = 0

    def batch(rows: int) -> tuple[int, int]:
        nonlocal after
        read, matched = erasure.candidates(selection, after=after, batch_size=rows)
        if not read:
            return 0, 0
        after = read[-1]
        erased = matched if actor is None else erasure.erase(matched, now, actor)
        return len(read), len(erased)

    pacer = pacer or Pacer(
        rows=EXPUNGE_FIRST_BATCH, min_rows=10, max_rows=EXPUNGE_MAX_BATCH,
        busy_batch_seconds=gauges.busy_batch_seconds,
    )  # fmt: skip
    return paced_batches(gauges, batch, pacer, pause=actor is not None)
