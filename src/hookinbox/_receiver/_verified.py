"""A delivery that passed verification: what storing it needs, and how it is answered once.

`Verified` carries its events (one, or a batch's several), the clock readings its log line and
spans need, and the way it is stored, chosen once when it is made (`committer`): every path
that stores it follows that choice, whichever entry it came through.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hookinbox._model import Event, NewDelivery, RecordedDelivery, Status

if TYPE_CHECKING:
    from hookinbox._storage import GroupCommitter


@dataclass(frozen=True, slots=True)
class Verified:
    """A delivery that passed verification and waits to be stored."""

    delivery: NewDelivery
    started: float
    """`time.perf_counter()` when the delivery reached the receiver (for the ack latency)."""
    answer: dict[str, Any] | None = None
    """The source's own body for a stored event (`Identity.answer`), sent instead of ours."""
    batch: tuple[NewDelivery, ...] = ()
    """Every event of a batched delivery (`delivery` is the first), stored in one
    transaction; empty for the usual delivery of one event."""
    span: Any = field(default=None, repr=False, compare=False)
    """The delivery's `receive` span (OpenTelemetry), ended with the reply; None without it."""
    verified_ns: int = 0
    """`time.time_ns()` when verification ended: where the `store` span starts."""
    committer: GroupCommitter | None = field(default=None, repr=False, compare=False)
    """The group committer that stores it, or None: stored in a transaction of its own
    (group commit off, an inline source, a receiver that keeps no rows)."""
    _answered: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def settle(self) -> bool:
        """True the first time only: that reply is the one logged and counted.

        Storing and the ack deadline race: when the deadline wins, the request is answered
        503 and the store that finishes later must not be counted as a second answer.
        """
        return self._answered.acquire(blocking=False)


def event_of(delivery: NewDelivery, *, row_id: int, delivery_count: int) -> Event:
    """The event handlers see for a delivery they handle in the request (attempt 1)."""
    return Event(
        row_id=row_id,
        source=delivery.source,
        id=delivery.event_id,
        type=delivery.event_type,
        occurred_at=delivery.occurred_at,
        received_at=delivery.received_at,
        body=delivery.body,
        headers=delivery.headers,
        status=Status.PROCESSING,
        attempts=1,
        delivery_count=delivery_count,
    )


def inline_event(delivery: NewDelivery, recorded: RecordedDelivery) -> Event:
    """`event_of` a delivery just stored, for its handlers run in the insert's transaction."""
    return event_of(delivery, row_id=recorded.row_id, delivery_count=recorded.delivery_count)
