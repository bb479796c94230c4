"""What storage's gateways take and return: plain frozen values, no SQL, no I/O.

The worker, the relay, the pruner, the dashboard and the command line build and read these;
only the storage package turns them into statements. Kept out of `_storage/` so that its front
door stays a handful of names (the store, its options, group commit), and so that the layers
above share one vocabulary with storage without importing its modules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Generic, TypeVar

from hookinbox._model import Event, Message, MessageStatus, Status

# -- the queues (`Store.events`, `Store.messages`) --------------------------------------------

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Lease(Generic[T]):
    """What one lease took: items to work on, and items whose previous lease had expired (their
    process died: the owner gives them back as it decides)."""

    token: str
    fresh: list[T]
    expired: list[T]


@dataclass(frozen=True, slots=True)
class Leased:
    """An event held by one worker until `expires_at`."""

    event: Event
    token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Release:
    """How an unsuccessful attempt leaves the event."""

    status: Status
    next_attempt_at: datetime
    last_error: str | None
    outcome: str | None = None
    refund_attempt: bool = False
    """NotReady costs no attempt: the one counted at lease time is given back."""
    deferred_since: datetime | None = None
    count_deferral: bool = False


@dataclass(frozen=True, slots=True)
class LeasedMessage:
    message: Message
    token: str
    expires_at: datetime
    trace_context: str | None = None
    """The sending handler's trace context (JSON), for the relay's span."""


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a delivery attempt ends."""

    status: MessageStatus
    next_attempt_at: datetime
    last_error: str | None = None


# -- the operator's view (`Store.operator`) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventFilter:
    status: Status | None = None
    source: str | None = None
    event_type: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    """Received strictly before this time."""
    event_id: str | None = None
    error_contains: str | None = None
    """Text the event's last error holds, in any case (failed events': what went wrong)."""


Cursor = tuple[datetime, int]
"""Where a page of events ended: the last row's (received_at, id)."""


class ReplayResult(StrEnum):
    REPLAYED = "replayed"
    NOT_FOUND = "not_found"
    NEEDS_FORCE = "needs_force"
    """The event was processed: running it again repeats its effects. (An unhandled event ran
    no handler, so it replays freely: that is how events get processed by a handler added
    after they arrived.)"""
    IN_PROGRESS = "in_progress"
    """A worker holds it right now (it is processing, or its row is locked): refused at once,
    never waited for."""


@dataclass(frozen=True, slots=True)
class Actor:
    """Who replays and why, for the audit trail."""

    who: str
    """The CLI's OS user, or "dashboard" (its one admin token names nobody)."""
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PausedSource:
    """A paused source: who paused it, when, why (`hookinbox_paused_sources`)."""

    source: str
    paused_at: datetime
    actor: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class PauseChange:
    """What a pause or a resume did."""

    source: str
    was_paused: bool
    events: int
    """Events parked (pause) or made due again (resume)."""


MAX_SEGMENTS = 8
MAX_VALUE_LENGTH = 200
SCAN_LIMIT = 5000
"""Events examined per page of a payload search (the newest matching the other filters)."""
_SEGMENT = re.compile(r"[A-Za-z0-9_\-]{1,64}")


@dataclass(frozen=True, slots=True)
class PayloadMatch:
    """`path` (keys, or array indexes as digits) leads to a scalar whose text is `value`."""

    path: tuple[str, ...]
    value: str


@dataclass(frozen=True, slots=True)
class Selection:
    """The events an erasure takes: those of `source` received before `before` (if given)
    whose body holds `payload` (if given)."""

    source: str
    before: datetime | None = None
    payload: PayloadMatch | None = None


def search_for(path: str, value: str) -> PayloadMatch:
    """A search from a form's fields; ValueError says what is wrong with them."""
    if len(value) > MAX_VALUE_LENGTH:
        raise ValueError(f"a payload value is at most {MAX_VALUE_LENGTH} characters")
    return PayloadMatch(parse_path(path), value)


def parse_path(text: str) -> tuple[str, ...]:
    """`data.object.customer` or `items.0.id` as segments; ValueError says what is wrong."""
    segments = tuple(text.strip().removeprefix("$.").split("."))
    if not 0 < len(segments) <= MAX_SEGMENTS:
        raise ValueError(f"a payload path has 1 to {MAX_SEGMENTS} segments")
    for segment in segments:
        if not _SEGMENT.fullmatch(segment):
            raise ValueError(
                f"payload path segment {segment[:70]!r}: letters, digits, _ and - only "
                "(1 to 64), separated by dots"
            )
    return segments


# -- figures (`Store.stats`) -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DuplicateRatio:
    deliveries: int
    duplicates: int

    @property
    def ratio(self) -> float:
        return self.duplicates / self.deliveries if self.deliveries else 0.0


@dataclass(frozen=True, slots=True)
class OpenFigures:
    """The cheap figures: what is waiting, stuck or failed (all from the open work's index)."""

    by_status: dict[str, int]
    oldest_pending: datetime | None
    oldest_deferred: datetime | None
    not_ready_deadline: int
    outbox: dict[str, int] = field(default_factory=dict)
    """Outbox messages not delivered, by status (pending, delivering, failed)."""
    workers: dict[tuple[str, str], int] = field(default_factory=dict)
    """(host, kind) -> live processes: workers and relays whose heartbeat has not expired."""

    def live(self, kind: str) -> int:
        """Live processes of `kind` (worker, relay) on every host."""
        return sum(count for (_, k), count in self.workers.items() if k == kind)

    def count(self, status: Status) -> int:
        return self.by_status.get(status.value, 0)


@dataclass(frozen=True, slots=True)
class Report:
    """Everything `hookinbox status` shows."""

    open: OpenFigures
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """(source, status) -> events."""
    duplicates: dict[str, DuplicateRatio] = field(default_factory=dict)
    """"last hour", "last day", "all" -> ratio."""


@dataclass(frozen=True, slots=True)
class Gauges:
    """What a metrics scrape reads, in one snapshot (`Stats.gauges`): the cheap figures only."""

    open: OpenFigures
    last_hour: DuplicateRatio
    last_day: DuplicateRatio


@dataclass(frozen=True, slots=True)
class Bucket:
    """One source's figures in one time bucket of `Stats.activity`."""

    deliveries: int = 0
    duplicates: int = 0
    failed: int = 0
    """Events received in the bucket that are failed now."""

    @property
    def duplicate_ratio(self) -> float:
        return self.duplicates / self.deliveries if self.deliveries else 0.0


# -- the pruner's pacing and the workers' heartbeats -------------------------------------------


@dataclass(frozen=True, slots=True)
class Pressure:
    """Other work on the database during a window."""

    others: int
    """Other sessions that ran something (PostgreSQL); on SQLite 1 when another connection
    committed, else 0."""
    waiting: int
    """Other sessions waiting for a lock or for I/O at the end of the window (PostgreSQL)."""

    @property
    def busy(self) -> bool:
        return self.others > 0 or self.waiting > 0


IDLE = Pressure(0, 0)


@dataclass(frozen=True, slots=True)
class Beat:
    """One process's heartbeat."""

    worker_id: str
    kind: str
    host: str
    pid: int
    started_at: datetime


@dataclass(frozen=True, slots=True)
class WorkerGroup:
    """The processes of one kind on one host, live or not yet pruned."""

    host: str
    kind: str
    alive: int
    silent: int
    """Rows whose heartbeat expired within the last hour (killed, hung, cut off)."""
    last_beat_at: datetime
    alive_since: datetime | None
    """When the longest-running live process started (None: none is alive)."""


# -- a handler's own writes --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UniqueViolation:
    """Which unique constraint a write broke, as far as the driver tells."""

    table: str | None
    columns: frozenset[str]
    constraint: str | None
