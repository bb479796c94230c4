"""A clock a test moves by hand: NotReady deferrals, backoff and deadlines without sleeping."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta


class Clock:
    """Seconds since the epoch, standing still until `advance` or `set` moves them.

    Pass it as an inbox's `clock`: signature tolerances, retry schedules, NotReady deadlines
    and the outbox's backoff all read it. It starts at the real time unless told otherwise.
    """

    def __init__(self, start: float | datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._now = _seconds(start) if start is not None else time.time()

    def __call__(self) -> float:
        with self._lock:
            return self._now

    def advance(self, seconds: float | timedelta) -> float:
        """Move forward (never back) by `seconds`; returns the new time."""
        step = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if step < 0:
            raise ValueError("a clock only moves forward")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: float | datetime) -> None:
        """Jump to `when` (Unix seconds or an aware datetime)."""
        with self._lock:
            self._now = _seconds(when)

    def __repr__(self) -> str:
        return f"Clock({self():.3f})"


def _seconds(when: float | datetime) -> float:
    return when.timestamp() if isinstance(when, datetime) else float(when)
