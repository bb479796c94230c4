"""One attempt at one event: claim, run handlers, commit; or put it back, or fail it."""

from __future__ import annotations

import logging
import random
import time
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Connection

from hookinbox import _tracing as tracing
from hookinbox._errors import NotReady, StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import count_attempt
from hookinbox._model import Event, Status
from hookinbox._processing._auto_pause import FailureStreaks
from hookinbox._processing._execute import BUSINESS_DUPLICATE, HANDLED, NO_HANDLER, run_handlers
from hookinbox._processing._handlers import Handler, HandlerRegistry
from hookinbox._processing._policy import RetryPolicy, Schedule
from hookinbox._processing._service import Processing
from hookinbox._processing._unrecorded import Unrecorded
from hookinbox._records import Leased, Release

log = logger("hookinbox.worker")

MAX_ERROR_LENGTH = 4000
TRACEBACK_FRAMES = 5

# Outcomes recorded in the `outcome` column besides the handlers' own (handled,
# business_duplicate, no_handler).
MAX_ATTEMPTS = "max_attempts"
NOT_READY_DEADLINE = "not_ready_deadline"
WORKER_LOST = "worker_lost"

# Attempt outcome labels (metrics and logs).
PROCESSED = "processed"
RETRIED = "retried"
DEFERRED = "deferred"
FAILED = "failed"
LOST_LEASE = "lost_lease"
UNRECORDED = "unrecorded"
SUCCESSES = frozenset({PROCESSED, BUSINESS_DUPLICATE, Status.UNHANDLED.value})


TAKEN_OVER = "another worker took it over"
FAILURES = frozenset({RETRIED, FAILED})
"""Attempt labels that count towards a source's auto-pause (a NotReady deferral does not)."""


@dataclass(frozen=True, slots=True)
class AttemptResult:
    label: str
    detail: str = ""


@dataclass(slots=True)
class Attempt:
    """One attempt as `Processor.observed` frames it; the worker running it sets `result`."""

    handlers: Sequence[Handler]
    schedule: Schedule
    exhausted: Release | None = None
    """Set when the event has no attempt left (max_attempts lowered): it is only released."""
    result: AttemptResult = AttemptResult(UNRECORDED, "not run")

    @property
    def label(self) -> str:
        return self.result.label


_PACKAGE = str(Path(__file__).resolve().parents[1])
_EXAMPLES = str(Path(_PACKAGE) / "examples")


def _ours(frame: traceback.FrameSummary) -> bool:
    """A frame of hookinbox's own code (its bundled examples are user code)."""
    name = frame.filename
    return name.startswith(_PACKAGE) and not name.startswith(_EXAMPLES)


def describe_error(error: BaseException) -> str:
    """Type, message and the last few frames: enough to debug, no locals, bounded.

    The user's frames come first: hookinbox's own (the processor, the handler call) are
    counted on one line after them, so the traceback starts where the user's code does. An
    error raised inside hookinbox keeps its frames.
    """
    frames = traceback.extract_tb(error.__traceback__)
    theirs = [frame for frame in frames if not _ours(frame)]
    hidden = len(frames) - len(theirs)
    if not theirs:
        theirs, hidden = frames, 0
    shown = traceback.StackSummary.from_list(theirs[-TRACEBACK_FRAMES:]).format()
    note = f"  ({hidden} hookinbox frame{'s' if hidden != 1 else ''} not shown)\n" if hidden else ""
    text = f"{type(error).__name__}: {error}\n{''.join(shown)}{note}"
    return text[:MAX_ERROR_LENGTH]


class Processor:
    """Knows the handlers and retry policies; turns a leased event into a finished attempt.

    Its statements are the processing service's (`processing`): the claim, the handlers'
    writes and the mark in one of its transactions, or the release."""

    def __init__(
        self,
        processing: Processing,
        handlers: HandlerRegistry,
        *,
        policy: RetryPolicy,
        source_policies: Mapping[str, RetryPolicy],
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        destinations: Collection[str] = (),
        on_messages: Callable[[], None] = lambda: None,
        auto_pause: Mapping[str, int] | None = None,
        on_auto_pause: Callable[[str, int], None] = lambda _source, _failures: None,
    ) -> None:
        self.processing = processing
        self.handlers = handlers
        self.policy = policy
        self.source_policies = source_policies
        self.clock = clock
        self.rng = rng or random.Random()
        self.destinations = destinations
        self.on_messages = on_messages
        self.unrecorded = Unrecorded()
        self.failures = FailureStreaks(auto_pause or {}, on_auto_pause, SUCCESSES, FAILURES)
        self._schedules: dict[tuple[RetryPolicy | None, tuple[RetryPolicy, ...]], Schedule] = {}

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def schedule(self, source: str, handlers: Sequence[Handler]) -> Schedule:
        handler_policies = tuple(h.retry for h in handlers if h.retry is not None)
        key = (self.source_policies.get(source), handler_policies)
        schedule = self._schedules.get(key)
        if schedule is None:  # policies are frozen: each combination is resolved once
            schedule = Schedule.resolve(self.policy, key[0], handler_policies)
            self._schedules[key] = schedule
        return schedule

    def process(self, leased: Leased) -> str:
        """Run one attempt; returns its outcome label (the metric's and the log line's)."""
        with self.observed(leased) as attempt:
            if attempt.exhausted:
                attempt.result = self.release(leased, attempt.exhausted)
            else:
                attempt.result = self._attempt(leased, attempt.handlers, attempt.schedule)
        return attempt.label

    @contextmanager
    def observed(self, leased: Leased) -> Iterator[Attempt]:
        """Around one attempt, whichever worker runs it: its handlers and schedule, its span,
        then its metric and log line from the `result` the body sets."""
        event = leased.event
        handlers = self.handlers.for_event(event.source, event.type)
        schedule = self.schedule(event.source, handlers)
        attempt = Attempt(handlers, schedule)
        if event.attempts_since_replay > schedule.max_attempts:
            # max_attempts was lowered below what this event has already used.
            attempt.exhausted = self._failure(event, schedule, "attempts exhausted")
        started = time.perf_counter()
        attributes = {
            "messaging.system": tracing.SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": event.source,
            "messaging.message.id": event.id,
            "hookinbox.event.type": event.type or "",
            "hookinbox.attempt": event.attempts,
        }
        # The stored context of the delivery's `receive` span: one trace, request to handler.
        with tracing.consuming(f"process {event.source}", event.headers, attributes) as span:
            yield attempt
            result = attempt.result
            failed = result.label not in SUCCESSES
            tracing.annotate(
                span, {"hookinbox.outcome": result.label}, error=result.label if failed else None
            )
        elapsed = time.perf_counter() - started
        count_attempt(event.source, event.type, result.label, elapsed)
        self._log(event, result, elapsed)
        self.failures.observe(event.source, result.label)

    def expectation(self, handlers: Sequence[Handler]) -> tuple[Status, str]:
        """The status and outcome an attempt records if its handlers all return."""
        if handlers:
            return Status.PROCESSED, HANDLED
        return Status.UNHANDLED, NO_HANDLER

    @staticmethod
    def succeeded(status: Status, outcome: str) -> AttemptResult:
        if status is Status.UNHANDLED:
            return AttemptResult(Status.UNHANDLED.value)
        return AttemptResult(BUSINESS_DUPLICATE if outcome == BUSINESS_DUPLICATE else PROCESSED)

    def failed(self, leased: Leased, schedule: Schedule, error: Exception) -> Release:
        """What an attempt that raised `error` leaves: deferred (NotReady), retried or failed."""
        if isinstance(error, NotReady):
            return self._deferral(leased.event, schedule, error)
        return self._failure(leased.event, schedule, describe_error(error))

    def _attempt(
        self, leased: Leased, handlers: Sequence[Handler], schedule: Schedule
    ) -> AttemptResult:
        event = leased.event
        status, expected = self.expectation(handlers)
        try:
            processing = self.processing
            with processing.transaction() as connection:
                with tracing.step("claim", self.claim_attributes()):
                    claimed = processing.claim(connection, leased, status, self.now(), expected)
                if not claimed:
                    return AttemptResult(LOST_LEASE, TAKEN_OVER)
                result = run_handlers(
                    processing, connection, event, handlers, self.clock, self.destinations
                )
                outcome = result.outcome
                if outcome != expected:
                    processing.set_outcome(connection, event.row_id, outcome)
                processing.refuse_aborted(connection)
            if result.messages:
                self.on_messages()  # committed: the relay may send them now
        except Exception as error:
            return self.release(leased, self.failed(leased, schedule, error))
        return self.succeeded(status, outcome)

    def claim_attributes(self) -> dict[str, str]:
        return {
            "db.system.name": self.processing.dialect.name,
            "db.operation.name": "UPDATE",
            "db.collection.name": "hookinbox_events",
        }

    def _failure(self, event: Event, schedule: Schedule, error: str) -> Release:
        now = self.now()
        # The budget counts from the last replay; `attempts` itself is history, never reset.
        run = event.attempts_since_replay
        if run >= schedule.max_attempts:
            return Release(Status.FAILED, now, error, outcome=MAX_ATTEMPTS)
        delay = schedule.delay(run, self.rng)
        return Release(Status.PENDING, now + timedelta(seconds=delay), error)

    def _deferral(self, event: Event, schedule: Schedule, error: NotReady) -> Release:
        now = self.now()
        since = event.deferred_since or now
        deadline = since + timedelta(seconds=schedule.not_ready_deadline)
        reason = f"NotReady: {error.message}"
        if now >= deadline:
            return Release(
                Status.FAILED, now, reason, outcome=NOT_READY_DEADLINE, refund_attempt=True
            )
        # NotReady's own gentle schedule (1 s, x1.5, up to not_ready_max_delay), not the
        # failure backoff: the predecessor usually arrives within seconds.
        delay = error.retry_in
        if delay is None:
            delay = schedule.not_ready_delay(event.deferrals + 1, self.rng)
        return Release(
            Status.DEFERRED,
            min(now + timedelta(seconds=max(0.0, delay)), deadline),
            reason,
            refund_attempt=True,
            deferred_since=since,
            count_deferral=True,
        )

    def expired(self, event: Event) -> Release:
        """For the sweeper: the worker holding `event` died (its lease ran out)."""
        handlers = self.handlers.for_event(event.source, event.type)
        error = "worker lost while processing: killed or crashed before its lease expired"
        schedule = self.schedule(event.source, handlers)
        release = self._failure(event, schedule, error)
        if release.status is Status.FAILED:
            return Release(Status.FAILED, release.next_attempt_at, error, outcome=WORKER_LOST)
        return release

    def release(self, leased: Leased, decision: Release) -> AttemptResult:
        try:
            if not self.processing.release(leased, decision):
                return AttemptResult(LOST_LEASE, TAKEN_OVER)
        except StoreUnavailable as error:
            # Written again before the next lease, once the database answers (or, if the
            # lease runs out first, the sweeper gives the event back).
            log.warning("could not record the attempt of %s: %s", leased.event.id, error)
            self.unrecorded.keep(
                lambda: self.processing.release(leased, decision),
                leased.expires_at,
                leased.event.id,
            )
            return AttemptResult(UNRECORDED, str(error))
        first_line = (decision.last_error or "").splitlines()[0] if decision.last_error else ""
        if decision.status is Status.DEFERRED:
            return AttemptResult(DEFERRED, first_line)
        if decision.status is Status.FAILED:
            return AttemptResult(FAILED, f"{decision.outcome}: {first_line}")
        return AttemptResult(RETRIED, first_line)

    def inline(self, connection: Connection, event: Event) -> None:
        """Inline mode: run the handlers in the ingest transaction; exceptions propagate."""
        handlers = self.handlers.for_event(event.source, event.type)
        result = run_handlers(
            self.processing, connection, event, handlers, self.clock, self.destinations
        )
        status = Status.PROCESSED if handlers else Status.UNHANDLED
        self.processing.mark_inline(connection, event.row_id, status, result.outcome, self.now())

    def _log(self, event: Event, result: AttemptResult, elapsed: float) -> None:
        level = logging.INFO if result.label in SUCCESSES else logging.WARNING
        if not log.isEnabledFor(level):
            return  # the line and its fields are not built for nothing
        log.log(
            level,
            "%s %s (%s) attempt %d: %s in %.1f ms%s",
            event.source,
            event.id,
            event.type or "-",
            event.attempts,
            result.label,
            elapsed * 1000,
            f" ({result.detail})" if result.detail else "",
            extra={
                "source": event.source,
                "event_id": event.id,
                "event_type": event.type,
                "attempt": event.attempts,
                "outcome": result.label,
                "latency_ms": round(elapsed * 1000, 2),
            },
        )
