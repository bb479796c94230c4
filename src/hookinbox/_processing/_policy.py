"""Retry policies: how often, how far apart, and for how long an event is tried.

A policy is set on the `Inbox`, on a source, and on a handler; each level overrides only the
fields it sets, and the most specific wins. When several handlers of one event set a field,
the strictest value applies (they share one transaction, so they share one retry budget).

Two schedules come out of one policy. A failure (the handler raised) backs off steeply
(`delay`: 5 s, x4, up to an hour), because it is a bug or an outage that will not be gone in
a second. A `NotReady` (an event that arrived before its predecessor) is expected and usually
resolves within seconds, when the predecessor arrives: `not_ready_delay` tries again after
about a second and backs off gently (x1.5) up to `not_ready_max_delay` (5 minutes), so a
late predecessor is followed promptly without a stuck event costing a transaction a second
until its `not_ready_deadline`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from hookinbox import _ranges as ranges

DAY = 86_400.0

NOT_READY_FIRST_DELAY = 1.0
"""Seconds before an event is tried again after its first `NotReady`."""
NOT_READY_FACTOR = 1.5
"""Each later `NotReady` waits this many times longer than the one before (up to the
policy's `not_ready_max_delay`); the policy's `jitter` spreads each wait."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry settings; a field left `None` is inherited from the less specific level."""

    max_attempts: int | None = None
    """Attempts before an event is `failed` (a worker that died mid-attempt counts one)."""
    first_delay: float | None = None
    """Seconds before the first retry."""
    factor: float | None = None
    """Each retry waits `factor` times longer than the one before..."""
    max_delay: float | None = None
    """...up to this many seconds."""
    jitter: float | None = None
    """Each delay is spread by up to +/- this fraction, so retries of many events disperse."""
    not_ready_deadline: float | None = None
    """Seconds after the first NotReady until the event fails with `not_ready_deadline`."""
    not_ready_max_delay: float | None = None
    """The longest wait between two tries of an event whose handler raised `NotReady` (the
    waits start near 1 s and grow 1.5 times per try, never past the deadline)."""

    def __post_init__(self) -> None:
        for name, limits in _POLICY_RANGES.items():
            limits.check_optional(name, getattr(self, name))

    def over(self, base: RetryPolicy) -> RetryPolicy:
        """This policy's fields where set, `base`'s elsewhere."""
        changes = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(base, **{k: v for k, v in changes.items() if v is not None})


_POLICY_RANGES = {
    "max_attempts": ranges.MAX_ATTEMPTS,
    "first_delay": ranges.RETRY_DELAY,
    "factor": ranges.RETRY_FACTOR,
    "max_delay": ranges.RETRY_DELAY,
    "jitter": ranges.JITTER,
    "not_ready_deadline": ranges.RETRY_DELAY,
    "not_ready_max_delay": ranges.NOT_READY_MAX_DELAY,
}
"""Finite, and short enough for a deadline in the calendar: `first_delay=1e300` raised
`OverflowError` out of the first retry, `nan` delays retried at once; a `not_ready_max_delay`
of 0 would try a stuck event in a loop, a transaction each, until its deadline."""


DEFAULT_POLICY = RetryPolicy(
    max_attempts=10,
    first_delay=5.0,
    factor=4.0,
    max_delay=3600.0,
    jitter=0.2,
    not_ready_deadline=3 * DAY,  # Stripe's retry window: past it, the predecessor is not coming
    # A stuck event costs a transaction every 5 minutes (864 over the 3-day deadline), and a
    # predecessor arriving late is followed within 5 minutes at most.
    not_ready_max_delay=300.0,
)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A fully resolved policy."""

    max_attempts: int
    first_delay: float
    factor: float
    max_delay: float
    jitter: float
    not_ready_deadline: float
    not_ready_max_delay: float

    @classmethod
    def resolve(
        cls, inbox: RetryPolicy, source: RetryPolicy | None, handlers: Iterable[RetryPolicy]
    ) -> Schedule:
        policy = DEFAULT_POLICY
        for level in (inbox, source):
            if level is not None:
                policy = level.over(policy)
        strictest: dict[str, Any] = {}
        for handler in handlers:
            for f in fields(handler):
                value = getattr(handler, f.name)
                if value is not None:
                    strictest[f.name] = min(strictest.get(f.name, value), value)
        policy = replace(policy, **strictest)
        return cls(**{f.name: getattr(policy, f.name) for f in fields(policy)})

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """Seconds before retry number `retry` (1 = the first retry) after a failure."""
        return self._spread(_backoff(self.first_delay, self.factor, self.max_delay, retry), rng)

    def not_ready_delay(self, deferral: int, rng: random.Random | None = None) -> float:
        """Seconds before the next try after `NotReady` number `deferral` (1 = the first)."""
        base = _backoff(NOT_READY_FIRST_DELAY, NOT_READY_FACTOR, self.not_ready_max_delay, deferral)
        return self._spread(base, rng)

    def _spread(self, base: float, rng: random.Random | None) -> float:
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1 + spread))


def _backoff(first: float, factor: float, cap: float, number: int) -> float:
    """`first`, times `factor` for each step after the first, up to `cap`."""
    exponent = min(max(0, number - 1), 64)  # past the cap anyway; keeps the power finite
    return min(cap, first * factor**exponent)
