"""How fast the pruner may go: batch sizes and pauses from what the database says.

A fixed batch and a fixed sleep are wrong at both ends: on an idle database they waste the
night, and on a 10-million-row inbox under load a 500-row batch took long enough, and came
often enough, to push ingest p99 from 27 ms to 2 s (bench/README.md, growth). So each batch is
timed, and the database is asked what else ran meanwhile (`PressureGauge`):

- **Duty cycle.** The pruner works at most `busy_duty` of the wall time while others use the
  database (pausing `took x (1 - duty) / duty` after a batch that took `took`), and
  `idle_duty` while nobody else does.
- **Batch length.** Batches are sized to take `busy_batch_seconds` while others are busy (a
  short transaction: locks and dirty pages released soon) and `idle_batch_seconds` otherwise,
  from the last batch's time per row, between `min_rows` and `max_rows`.
- **Back-off.** When other sessions wait for a lock or for I/O, the pause doubles (up to
  `max_pause`) until they no longer do.

On SQLite a batch holds the one write lock, so every delivery's commit waits for it. Shorter
batches (5 ms) measured worse, not better: ingest p99 110-200 ms against 40 ms with 20 ms
batches at a million rows (bench/README.md, growth), so both databases get the same pacing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hookinbox._storage import Pressure


@dataclass
class Pacer:
    busy_duty: float = 0.15
    idle_duty: float = 0.9
    busy_batch_seconds: float = 0.02
    idle_batch_seconds: float = 0.5
    min_rows: int = 50
    max_rows: int = 5_000
    max_pause: float = 5.0
    rows: int = 500
    """The next batch's size: starts at the caller's batch size."""
    backoff: float = field(default=0.0, init=False)

    def next_pause(self, rows_done: int, took: float, pressure: Pressure) -> float:
        """After a batch of `rows_done` rows that took `took` seconds, with `pressure` seen
        in the pause before it: adjust `rows` and return the pause before the next batch."""
        busy = pressure.busy
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
        return min(self.max_pause, took * (1 - duty) / duty + self.backoff)
