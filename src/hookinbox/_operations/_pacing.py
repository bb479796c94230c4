"""How fast the pruner may go: batch sizes and pauses from what the database says.

A fixed batch and a fixed sleep are wrong at both ends: on an idle database they waste the
night, and on a 10-million-row inbox under load a 500-row batch took long enough, and came
often enough, to push ingest p99 from 27 ms to 2 s (bench/README.md, growth). So each batch is
timed, and the database is asked what else ran meanwhile (`PressureGauge`):

- **Duty cycle.** The pruner works at most `busy_duty` of the wall time while others use the
  database (pausing `took x (1 - duty) / duty` after a batch that took `took`), and
  `idle_duty` while nobody else does.
- **Idle means quiet for a while.** The database counts as idle only once nobody else has
  committed during `idle_after` seconds of pauses in a row. One quiet window proves little: the
  first one of a run lasts no time at all, and a writer still waiting for the lock commits
  nothing in it. Taken at its word, it turned the first 100-page step of a SQLite space
  give-back into a 5,000-page step (155 ms) followed by a 0.5 ms pause, in which a waiting
  writer may again commit nothing (bench/README.md, growth).
- **Batch length.** Batches are sized to take `busy_batch_seconds` while others are busy (a
  short transaction: locks and dirty pages released soon) and `idle_batch_seconds` otherwise,
  from the last batch's time per row, between `min_rows` and `max_rows`.
- **Back-off.** When other sessions wait for a lock or for I/O, the pause doubles (up to
  `max_pause`) until they no longer do.

On SQLite a batch holds the one write lock, so a delivery that arrives during one waits for
the rest of it: batches there aim at 5 ms (`Dialect.prune_busy_batch_seconds`) while others write.
5 ms batches once measured worse than 20 ms ones (ingest p99 110-200 ms against 40 ms), but
that was SQLite's busy handler, whose sleeps of up to 100 ms cost more the more often a
delivery met a batch; hookinbox's writers now poll for the lock every millisecond, and at a
million rows 5 ms batches measured p99 32 ms against 44 ms with 20 ms ones (bench/README.md,
growth). PostgreSQL keeps 20 ms: its batches lock only the old rows they delete.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hookinbox._records import Pressure
from hookinbox._storage import Dialect


@dataclass
class Pacer:
    busy_duty: float = 0.15
    idle_duty: float = 0.9
    busy_batch_seconds: float = 0.02
    idle_batch_seconds: float = 0.5
    min_rows: int = 50
    max_rows: int = 5_000
    max_pause: float = 5.0
    idle_after: float = 1.0
    rows: int = 500
    """The next batch's size (per table): starts at the caller's batch size."""
    backoff: float = field(default=0.0, init=False)
    quiet: float = field(default=0.0, init=False)
    """Seconds of pauses in a row in which nobody else committed."""
    _last_pause: float = field(default=0.0, init=False, repr=False)

    @classmethod
    def for_dialect(cls, dialect: Dialect, rows: int) -> Pacer:
        """The pacing for a database: short batches on SQLite, whose one write lock every
        delivery waits for while a batch holds it."""
        return cls(rows=rows, busy_batch_seconds=dialect.prune_busy_batch_seconds)

    def next_pause(self, rows_done: int, took: float, pressure: Pressure) -> float:
        """After a batch of `rows_done` rows (of the table that had the most) that took `took`
        seconds, with `pressure` seen in the pause before it: adjust `rows` and return the
        pause before the next batch."""
        # The window `pressure` describes is the pause returned last time.
        self.quiet = 0.0 if pressure.busy else self.quiet + self._last_pause
        busy = pressure.busy or self.quiet < self.idle_after
        if rows_done > 0 and took > 0:
            goal = self.busy_batch_seconds if busy else self.idle_batch_seconds
            wanted = int(goal * rows_done / took)
            # Halfway towards what the last batch suggests: one odd batch does not swing it.
            self.rows = max(self.min_rows, min(self.max_rows, (self.rows + wanted + 1) // 2))
        if busy and rows_done > 0 and took > 0:
            # Others are working: never more than the busy goal, whatever the history says.
            cap = int(self.busy_batch_seconds * rows_done / took)
            self.rows = max(self.min_rows, min(self.rows, cap))
        if pressure.waiting:
            self.backoff = min(self.max_pause, max(0.05, self.backoff * 2))
        else:
            self.backoff = 0.0
        duty = self.busy_duty if busy else self.idle_duty
        self._last_pause = min(self.max_pause, took * (1 - duty) / duty + self.backoff)
        return self._last_pause
