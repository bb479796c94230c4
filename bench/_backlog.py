"""The backlog over time, and whether it stayed bounded (bench/processing.py's mixed scenario).

The backlog is the number of events in the waiting statuses (pending, deferred, processing):
accepted and not yet done. A sampler thread reads it, with the number of events stored, in one
SQL statement (one snapshot) every `interval` seconds while the load runs.

**Bounded**, precisely: the backlog at the end of the run is at most the larger of
- the backlog at the two-thirds mark of the run, and
- `SLACK_SECONDS` (2) seconds of the offered load (offered requests/s x 2).
A backlog ending within 2 s of load passes whatever its shape (the workers keep up, with
jitter); above that, it must end no higher than it was at two thirds: it stopped growing. A
backlog growing steadily from empty by g events/s fails when g x the run's seconds exceeds 2 s
of load: in a 60-s run, growth faster than 1/30 of the offered rate. "Offered" is what the
load generator sent, not what was asked of it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import sqlalchemy as sa

from bench._common import sa_url
from hookinbox._storage._schema import event_queue, events, status_is

WAITING = ("pending", "deferred", "processing")
SLACK_SECONDS = 2.0
MARKS = (0.25, 0.50, 0.75, 1.00)


@dataclass(frozen=True)
class Sample:
    at: float
    """`time.monotonic()` when the count was read."""
    backlog: int
    """Events in the waiting statuses."""
    stored: int
    """Every event in `hookinbox_events`: backlog + done (processed, or failed or unhandled)."""


class BacklogSampler:
    """Counts the backlog every `interval` seconds in a thread while inside `with`; `sample()`
    takes one more at once (the run's first and last, exactly at its edges)."""

    def __init__(self, url: str, interval: float = 1.0) -> None:
        self.interval = interval
        self.samples: list[Sample] = []
        self._engine = sa.create_engine(sa_url(url))
        # From the queue's table of unfinished work (schema 9), as the worker reads it.
        waiting = sa.select(sa.func.count()).where(status_is(event_queue.c.state, *WAITING))
        stored = sa.select(sa.func.count()).select_from(events)
        # One statement, so both counts come from one snapshot: stored - backlog is what was
        # done by that instant, never a row counted in neither or in both.
        self._query = sa.select(waiting.scalar_subquery(), stored.scalar_subquery())
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backlog-sampler", daemon=True)
        self._error: BaseException | None = None

    def sample(self) -> Sample:
        with self._engine.connect() as connection:
            backlog, stored = connection.execute(self._query).one()
        taken = Sample(time.monotonic(), int(backlog), int(stored))
        with self._lock:
            self.samples.append(taken)
        return taken

    def _run(self) -> None:
        due = time.monotonic()
        try:
            while not self._stop.wait(max(0.0, due - time.monotonic())):
                self.sample()
                # On a fixed schedule; a slow read (a loaded database) skips, never bunches.
                due = max(due + self.interval, time.monotonic())
        except BaseException as error:  # handed to the caller on exit
            self._error = error

    def __enter__(self) -> BacklogSampler:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._engine.dispose()
        if self._error is not None and kind is None:
            raise RuntimeError("the backlog sampler failed") from self._error


def backlog_at(samples: list[Sample], instant: float) -> int:
    """The backlog of the sample nearest `instant`."""
    return min(samples, key=lambda s: abs(s.at - instant)).backlog


def backlog_report(
    samples: list[Sample], *, began: float, finished: float, offered_rate: float
) -> dict[str, Any]:
    """What the run did to the backlog, between the load's first request (`began`) and its
    last answer (`finished`), from `samples` that include one at or before `began` and one at
    or after `finished` (the first and last, by time)."""
    ordered = sorted(samples, key=lambda s: s.at)
    first, last = ordered[0], ordered[-1]
    seconds = max(finished - began, 1e-9)
    marks = {f"{round(m * 100)}%": backlog_at(ordered, began + m * seconds) for m in MARKS[:-1]}
    marks["100%"] = last.backlog  # the sample taken once the last answer was in
    two_thirds = backlog_at(ordered, began + seconds * 2 / 3)
    limit = max(float(two_thirds), SLACK_SECONDS * offered_rate)
    done = (last.stored - last.backlog) - (first.stored - first.backlog)
    return {
        "seconds": seconds,
        "offered_rate": offered_rate,
        "accepted_rate": (last.stored - first.stored) / seconds,
        "processed_rate": done / seconds,
        "backlog": marks,
        "backlog_two_thirds": two_thirds,
        "backlog_max": max(s.backlog for s in ordered),
        "last_third_growth_per_second": (last.backlog - two_thirds) / (seconds / 3),
        "bounded_limit": limit,
        "bounded": last.backlog <= limit,
        "series": [
            {"t": round(s.at - began, 3), "backlog": s.backlog, "stored": s.stored} for s in ordered
        ],
    }
