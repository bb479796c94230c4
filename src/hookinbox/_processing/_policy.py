"""Retry policies: how often, how far apart, and for how long an event is tried.

A policy is set on the `Inbox`, on a source, and on a handler; each level overrides only the
fields it sets, and the most specific wins. When several handlers of one event set a field,
the strictest value applies (they share one transaction, so they share one retry budget).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import Any

from hookinbox._errors import ConfigurationError

DAY = 86_400.0


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

    def __post_init__(self) -> None:
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        for name in ("first_delay", "max_delay", "not_ready_deadline"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigurationError(f"{name} must not be negative")
        if self.factor is not None and self.factor < 1:
            raise ConfigurationError("factor must be at least 1")
        if self.jitter is not None and not 0 <= self.jitter < 1:
            raise ConfigurationError("jitter must be in [0, 1)")

    def over(self, base: RetryPolicy) -> RetryPolicy:
        """This policy's fields where set, `base`'s elsewhere."""
        changes = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(base, **{k: v for k, v in changes.items() if v is not None})


DEFAULT_POLICY = RetryPolicy(
    max_attempts=10,
    first_delay=5.0,
    factor=4.0,
    max_delay=3600.0,
    jitter=0.2,
    not_ready_deadline=3 * DAY,  # Stripe's retry window: past it, the predecessor is not coming
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
        """Seconds before retry number `retry` (1 = the first retry)."""
        exponent = min(max(0, retry - 1), 64)  # past the cap anyway; keeps the power finite
        base = min(self.max_delay, self.first_delay * self.factor**exponent)
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, base * (1 + spread))
