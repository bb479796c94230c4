"""The data that flows from ingest to processing: plain values, no behaviour, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import cached_property
from typing import Any

from hookinbox._payload import decode_payload

MAX_KEY_LENGTH = 255
"""The longest event id or outbox key stored (the columns are VARCHAR(255))."""


class Status(StrEnum):
    """Where an event is in its life.

    pending -> processing -> processed            (handlers committed)
                          -> pending / deferred   (error with retries left / NotReady)
                          -> failed               (out of attempts, or past the NotReady deadline)
    pending -> unhandled                          (no handler registered for its source and type)
    stale                                         (older than the retention when it arrived:
                                                   held for an operator, see docs/operations.md)
    paused                                        (its source is paused: kept, not processed
                                                   until the source is resumed; schema 16)
    invalid                                       (an event of a batch that names no usable id:
                                                   held for an operator with the reason as its
                                                   last error, never processed)
    """

    PENDING = "pending"
    PROCESSING = "processing"
    DEFERRED = "deferred"
    PROCESSED = "processed"
    UNHANDLED = "unhandled"
    FAILED = "failed"
    STALE = "stale"
    INVALID = "invalid"
    PAUSED = "paused"


WAITING_STATUSES = (Status.PENDING, Status.DEFERRED)
"""Statuses a worker picks up once `next_attempt_at` has come."""

DONE_STATUSES = (Status.PROCESSED, Status.UNHANDLED)
"""Statuses the pruner may delete once past the retention; every other status waits."""


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """One verified delivery, ready to be stored."""

    source: str
    event_id: str
    event_type: str | None
    occurred_at: datetime | None
    received_at: datetime
    body: bytes
    headers: dict[str, str]
    body_sha256: str
    stale: bool = False
    """Older than the retention: stored as `stale`, not processed (a pruned twin may exist)."""
    invalid: str | None = None
    """Why this event of a batch cannot be processed (no usable id): stored as `invalid`, with
    this as its `last_error`, and never processed; None for every usable event."""


def initial_status(delivery: NewDelivery) -> Status:
    """The status a delivery's event is created with."""
    if delivery.invalid is not None:
        return Status.INVALID
    return Status.STALE if delivery.stale else Status.PENDING


@dataclass(frozen=True, slots=True)
class RecordedDelivery:
    """What storing a delivery did: a new event, or one more delivery of a known one."""

    row_id: int
    is_new: bool
    delivery_count: int
    key_conflict: bool
    """Same key as a stored event but a different body: still a duplicate, logged and counted."""
    status: Status


@dataclass(frozen=True)
class Event:
    """A stored event as handlers see it."""

    row_id: int
    source: str
    id: str
    type: str | None
    occurred_at: datetime | None
    received_at: datetime
    body: bytes
    headers: dict[str, str]
    status: Status
    attempts: int
    delivery_count: int
    last_error: str | None = None
    outcome: str | None = None
    deferrals: int = 0
    deferred_since: datetime | None = None
    next_attempt_at: datetime | None = None
    processed_at: datetime | None = None
    key_conflicts: int = 0
    last_delivery_at: datetime | None = None
    forced_replay_at: datetime | None = None
    """When an operator last replayed it after it had been processed (`replay --force`): the
    first run's writes stay in place, whatever the re-run does."""
    attempts_before_replay: int = 0
    """`attempts` as it was at the last replay (0 if never replayed). `attempts` counts every
    attempt ever made, across replays; the retry budget counts from the last replay."""
    received_via: str = "webhook"
    """How the event first arrived: `webhook` (a delivery), or `reconcile` (found in the
    provider's API by `hookinbox reconcile`, before any delivery of it)."""

    @property
    def attempts_since_replay(self) -> int:
        """The attempts of the current run: what `RetryPolicy(max_attempts=...)` limits."""
        return self.attempts - self.attempts_before_replay

    @cached_property
    def payload(self) -> Any:
        """The body parsed as JSON, or a form body's fields (Twilio), as it was when received."""
        return decode_payload(self.body, self.headers.get("content-type"))


class MessageStatus(StrEnum):
    """An outbox message: pending -> delivering -> delivered, or back to pending, or failed."""

    PENDING = "pending"
    DELIVERING = "delivering"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True)
class Message:
    """An outbox message as a destination sees it."""

    row_id: int
    destination: str
    key: str
    """Unique per destination and stable across retries: send it as the Idempotency-Key."""
    payload: Any
    ordering_key: str | None
    source: str | None
    event_id: str | None
    attempts: int
    created_at: datetime
