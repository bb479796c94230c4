"""Auto-pause: a source whose attempts keep failing is paused by the worker (`add_source(...,
auto_pause_after=N)`, off by default).

The streak is counted per worker process, from the attempts it runs: N failed attempts in a
row (retried or failed; a NotReady deferral, a lost lease or an unrecorded attempt neither
counts nor ends it) and no success between them. With several worker processes each counts
its own; the first to reach N pauses the source. The pause itself is the runtime's (the
operations service's, audited with the actor "auto-pause"), run off the worker's thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping


class FailureStreaks:
    """Each auto-paused source's failed attempts in a row, in this process: a success ends
    the streak; the `limit`-th failure calls `pause(source, failures)` once and starts again."""

    def __init__(
        self,
        limits: Mapping[str, int],
        pause: Callable[[str, int], None],
        successes: Collection[str],
        failures: Collection[str],
    ) -> None:
        self.limits = dict(limits)
        self.pause = pause
        self.successes = successes
        self.failures = failures
        self._streaks: dict[str, int] = {}
        self._lock = threading.Lock()

    def observe(self, source: str, label: str) -> None:
        limit = self.limits.get(source)
        if limit is None:
            return  # the usual case: no auto-pause for this source, nothing counted
        with self._lock:
            if label in self.successes:
                self._streaks[source] = 0
                return
            if label not in self.failures:
                return
            streak = self._streaks.get(source, 0) + 1
            self._streaks[source] = 0 if streak >= limit else streak
        if streak >= limit:
            self.pause(source, streak)
