"""The relay: deliver leased outbox messages through their destinations, at least once."""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from hookinbox import _tracing as tracing
from hookinbox._errors import StoreUnavailable
from hookinbox._logging import logger
from hookinbox._metrics import count_message
from hookinbox._model import Message, MessageStatus
from hookinbox._processing import RetryPolicy, Schedule
from hookinbox._processing._processor import describe_error
from hookinbox._processing._queues import StoreQueue
from hookinbox._processing._service import Processing
from hookinbox._processing._unrecorded import Unrecorded
from hookinbox._records import Lease, LeasedMessage, Settlement
from hookinbox.outbox._destinations import (
    AsyncDestination,
    DeliveryError,
    Destination,
    Undeliverable,
)

log = logger("hookinbox.relay")


@dataclass(slots=True)
class Sending:
    """One delivery attempt as `Relay.observed` frames it; the relay running it fills it in."""

    settlement: Settlement = field(
        default_factory=lambda: Settlement(MessageStatus.PENDING, datetime.now(UTC), "not run")
    )
    label: str = "unrecorded"


class Relay:
    """Knows the destinations and their retry policies; settles one delivery attempt
    through the processing service (`processing`)."""

    def __init__(
        self,
        processing: Processing,
        destinations: Mapping[str, Destination],
        *,
        policy: RetryPolicy,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        self.processing = processing
        self.destinations = destinations
        self.policy = policy
        self.clock = clock
        self.rng = rng or random.Random()
        self.unrecorded = Unrecorded()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def schedule(self, destination: str) -> Schedule:
        own = self.destinations[destination].retry if destination in self.destinations else None
        return Schedule.resolve(self.policy, own, [])

    def deliver(self, leased: LeasedMessage) -> str:
        """One attempt; returns its outcome label: delivered, retried, failed, lost_lease."""
        with self.observed(leased) as attempt:
            attempt.settlement = self.attempt(leased.message)
            attempt.label = self.settle(leased, attempt.settlement)
        return attempt.label

    @contextmanager
    def observed(self, leased: LeasedMessage) -> Iterator[Sending]:
        """Around one attempt, whichever relay runs it: its span, then its metric and log
        line from what the body sets."""
        message = leased.message
        started = time.perf_counter()
        attributes = {
            "messaging.system": tracing.SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": message.destination,
            "messaging.message.id": message.key,
            "hookinbox.attempt": message.attempts,
        }
        name = f"send {message.destination}"
        attempt = Sending()
        with tracing.consuming(name, leased.trace_context, attributes, kind="producer") as span:
            yield attempt
            label = attempt.label
            error = None if label == "delivered" else label
            tracing.annotate(span, {"hookinbox.outcome": label}, error=error)
        elapsed = time.perf_counter() - started
        count_message(message.destination, label, elapsed)
        level = logging.INFO if label == "delivered" else logging.WARNING
        first_line = (attempt.settlement.last_error or "").split("\n", 1)[0]
        log.log(
            level,
            "%s %s attempt %d: %s in %.1f ms%s",
            message.destination,
            message.key,
            message.attempts,
            label,
            elapsed * 1000,
            f" ({first_line})" if first_line else "",
            extra={
                "outcome": label,
                "attempt": message.attempts,
                "source": message.source,
                "event_id": message.event_id,
            },
        )

    def attempt(self, message: Message) -> Settlement:
        destination = self.destinations.get(message.destination)
        try:
            if destination is None:
                raise DeliveryError(f"no destination named {message.destination!r} is configured")
            destination.deliver(message)
        except Exception as error:
            return self.settlement(message, error)
        return Settlement(MessageStatus.DELIVERED, self.now())

    async def attempt_async(self, message: Message) -> Settlement:
        """`attempt` on the async worker's relay: `adeliver` awaited where the destination has
        one, `deliver` in a thread where it has not (it may block)."""
        destination = self.destinations.get(message.destination)
        try:
            if destination is None:
                raise DeliveryError(f"no destination named {message.destination!r} is configured")
            if isinstance(destination, AsyncDestination):
                await destination.adeliver(message)
            else:
                await asyncio.to_thread(destination.deliver, message)
        except Exception as error:
            return self.settlement(message, error)
        return Settlement(MessageStatus.DELIVERED, self.now())

    def settlement(self, message: Message, error: Exception) -> Settlement:
        """How an attempt that raised `error` ends: failed for good, or retried."""
        if isinstance(error, Undeliverable):
            return Settlement(MessageStatus.FAILED, self.now(), error.message)
        if isinstance(error, DeliveryError):
            return self._retry(message, error.message, error.retry_after)
        return self._retry(message, describe_error(error), None)

    def _retry(self, message: Message, error: str, retry_after: float | None) -> Settlement:
        schedule = self.schedule(message.destination)
        now = self.now()
        if message.attempts >= schedule.max_attempts:
            return Settlement(MessageStatus.FAILED, now, error)
        delay = schedule.delay(message.attempts, self.rng)
        asked = _seconds(retry_after)
        if asked is not None:
            # The receiver said when: never sooner, but never past the policy's longest delay
            # (a hostile value must not park the message for a year, or overflow the clock).
            delay = max(delay, min(max(0.0, asked), schedule.max_delay))
        return Settlement(MessageStatus.PENDING, now + timedelta(seconds=delay), error)

    def settle(self, leased: LeasedMessage, settlement: Settlement) -> str:
        now = self.now()  # when it was delivered, even if written later
        try:
            if not self.processing.record(leased, settlement, now):
                return "lost_lease"
        except StoreUnavailable as error:
            log.warning("could not record delivery of %s: %s", leased.message.key, error)
            self.unrecorded.keep(
                lambda: self.processing.record(leased, settlement, now),
                leased.expires_at,
                leased.message.key,
            )
            return "unrecorded"
        return {
            MessageStatus.DELIVERED: "delivered",
            MessageStatus.FAILED: "failed",
        }.get(settlement.status, "retried")

    def expired(self, message: Message) -> Settlement:
        """For the sweeper: the relay delivering `message` died; it was maybe sent, maybe not."""
        error = "relay lost while delivering: killed or crashed before its lease expired"
        return self._retry(message, error, None)


def _seconds(retry_after: object) -> float | None:
    """A destination's `retry_after` as seconds; None when it is not a number (or NaN)."""
    if retry_after is None:
        return None
    try:
        seconds = float(retry_after)  # type: ignore[arg-type]  # a callable may raise anything
    except (TypeError, ValueError, OverflowError):
        return None
    return None if math.isnan(seconds) else seconds


class MessageQueue(StoreQueue[LeasedMessage]):
    name = "outbox"

    def __init__(self, relay: Relay, lease_seconds: float) -> None:
        super().__init__(relay.processing, relay.unrecorded, lease_seconds)
        self.relay = relay

    def now(self) -> datetime:
        return self.relay.now()

    def _has_due(self, now: datetime) -> bool:
        return self.processing.messages_due(now)

    def _next_due_at(self) -> datetime | None:
        return self.processing.next_message_due_at()

    def _lease(self, limit: int, now: datetime, until: datetime) -> Lease[LeasedMessage]:
        return self.processing.lease_messages(limit=limit, now=now, until=until)

    def _give_back(self, item: LeasedMessage) -> None:
        message = item.message
        if self.processing.record(item, self.relay.expired(message), self.now()):
            log.warning("%s %s: lease expired (relay lost); given back", message.destination,
                        message.key)  # fmt: skip

    def process(self, item: LeasedMessage) -> str:
        return self.relay.deliver(item)
