"""Retention: delete done events, the delivery log and delivered outbox messages older than the
retention, in batches.

Pruning ends deduplication for what it deletes: a provider's later redelivery of a pruned
event would look new. So the retention may not be shorter than the longest redelivery window
of any configured source (Stripe: 30 days of manual resend) unless forced, and events that
arrive already older than the retention are held as `stale` instead of processed.

A source may keep its events longer or shorter than the inbox's retention
(`inbox.add_source(source, retention=...)`): `Retentions` holds the inbox's and each source's,
and the prune deletes each source's done events and delivery log by its own cutoff.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from hookinbox._errors import ConfigurationError
from hookinbox._logging import logger
from hookinbox._operations._pacing import Pacer
from hookinbox._storage import Cutoffs, PressureGauge, Sweep
from hookinbox.sources import Source

log = logger("hookinbox.prune")

DEFAULT_RETENTION = timedelta(days=90)
DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True, slots=True)
class PruneResult:
    events: int
    deliveries: int
    messages: int
    dry_run: bool
    pages_returned: int = 0
    """SQLite: free pages given back to the file system after the prune."""

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"{verb} {self.events} events, {self.deliveries} delivery log rows and "
            f"{self.messages} delivered outbox messages"
        )


@dataclass(frozen=True, slots=True)
class Retentions:
    """How long done events are kept: `default` (the inbox's `retention`) for every source
    that `by_source` does not name."""

    default: timedelta = DEFAULT_RETENTION
    by_source: Mapping[str, timedelta] = field(default_factory=dict)

    def for_source(self, source: str) -> timedelta:
        return self.by_source.get(source, self.default)

    def cutoffs(self, now: datetime) -> Cutoffs:
        return Cutoffs(
            now - self.default,
            {name: now - kept for name, kept in self.by_source.items() if kept != self.default},
        )

    def describe(self, sources: Iterable[str]) -> dict[str, str]:
        """Each source's retention as `90d`, by name (the CLI's and the dashboard's lines)."""
        return {name: format_duration(self.for_source(name)) for name in sorted(sources)}


class Retention(Protocol):
    """What the pruner works on: a store's housekeeping gateway (`Housekeeping`), named here so
    that the pruner depends on these members only, and the operations service chooses the
    store."""

    @property
    def busy_batch_seconds(self) -> float: ...

    def count_prunable(self, cutoff: Cutoffs) -> tuple[int, int, int]: ...

    def prune_batch(self, cutoff: Sweep, batch_size: int) -> tuple[int, int, int]: ...

    def pressure_gauge(self) -> PressureGauge: ...

    def checkpoint_passive(self) -> None: ...

    def free_pages(self) -> int: ...

    def give_back_pages(self, pages: int) -> int: ...


def check_retention(
    retention: timedelta | Retentions,
    sources: Iterable[Source],
    *,
    force: bool,
    forced: Iterable[str] = (),
) -> None:
    """Refuse a retention shorter than a source's redelivery window, unless forced (`force`:
    every source; `forced`: the sources named)."""
    retentions = retention if isinstance(retention, Retentions) else Retentions(retention)
    if retentions.default <= timedelta(0):
        raise ConfigurationError("the retention must be positive")
    allowed = set(forced)
    too_short = [
        s
        for s in sources
        if s.redelivery_window > retentions.for_source(s.name) and s.name not in allowed
    ]
    if too_short and not force:
        longest = max(too_short, key=lambda s: s.redelivery_window)
        kept = retentions.for_source(longest.name)
        own = longest.name in retentions.by_source
        whose = f"{longest.name}'s retention" if own else "retention"
        raise ConfigurationError(
            f"{whose} {format_duration(kept)} is shorter than {longest.name}'s "
            f"redelivery window ({format_duration(longest.redelivery_window)}): a redelivery "
            "after pruning would be processed again; use a longer retention or --force"
        )


def prune(
    housekeeping: Retention,
    *,
    now: datetime,
    retention: timedelta | Retentions,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH_SIZE,
    pacer: Pacer | None = None,
    progress: Callable[[int], None] | None = None,
    stop: threading.Event | None = None,
) -> PruneResult:
    """Delete done events received before `now - retention` (each source's own, with
    `Retentions`), in short transactions.

    Each batch is timed and the database asked what else ran meanwhile: batches shrink and
    pauses grow while deliveries and workers use the database, and the pruner runs nearly
    flat out while nobody does (`Pacer`; docs/operations.md, "Retention"). `batch_size` is
    the first batch's size. `progress` gets the events of each batch. `stop` (the worker's
    shutdown) ends the prune between batches: what was deleted stays deleted, the rest waits
    for the next run.
    """
    retentions = retention if isinstance(retention, Retentions) else Retentions(retention)
    cutoffs = retentions.cutoffs(now)
    cutoff = cutoffs.default
    if dry_run:
        return PruneResult(*housekeeping.count_prunable(cutoffs), dry_run=True)
    sweep = Sweep(cutoffs)
    pacer = pacer or Pacer(rows=batch_size, busy_batch_seconds=housekeeping.busy_batch_seconds)
    gauge = housekeeping.pressure_gauge()
    totals = [0, 0, 0]
    checkpointed = time.monotonic()
    try:
        gauge.mark()
        while stop is None or not stop.is_set():
            pressure = gauge.sample()
            started = time.perf_counter()
            deleted = housekeeping.prune_batch(sweep, pacer.rows)
            took = time.perf_counter() - started
            gauge.mark()
            totals = [total + n for total, n in zip(totals, deleted, strict=True)]
            if progress is not None and deleted[0]:
                progress(deleted[0])
            if not any(deleted) and sweep.finished:
                break
            if time.monotonic() - checkpointed >= CHECKPOINT_EVERY:
                # SQLite: the pruner's pages, not the ingest writer's
                housekeeping.checkpoint_passive()
                checkpointed = time.monotonic()
            # `rows` bounds each table's deletes, not their sum: the sum, an events batch and
            # a log batch, made every batch twice the time the pacer aimed at.
            # A batch of the window may read a batch of kept rows and delete none: timed too.
            pause = pacer.next_pause(max(*deleted, sweep.read), took, pressure)
            if stop is None:
                time.sleep(pause)
            else:
                stop.wait(pause)
        stopped = stop is not None and stop.is_set()
        returned = 0 if stopped else _give_back_space(housekeeping, gauge)
    finally:
        gauge.close()
    result = PruneResult(totals[0], totals[1], totals[2], dry_run=False, pages_returned=returned)
    log.info(
        "prune older than %s%s: %s",
        cutoff.isoformat(),
        " stopped (the worker is stopping)" if stopped else "",
        result.summary(),
    )
    return result


CHECKPOINT_EVERY = 1.0
"""Seconds between the pruner's own WAL checkpoints (SQLite)."""

FIRST_PAGES_STEP = 100
"""Free pages returned to the file system by the first short write (SQLite: 400 KB of 4 KiB
pages); later steps are sized like the batches, by time (`Pacer`): 1,000-page steps held
SQLite's write lock long enough to raise ingest p99 to 150-190 ms at a million rows."""


def _give_back_space(housekeeping: Retention, gauge: PressureGauge) -> int:
    """SQLite: return the pages the prune freed to the file system, a step at a time, paced
    like the batches (nothing on PostgreSQL, or on a SQLite file without incremental
    auto-vacuum: docs/storage.md)."""
    returned = 0
    busy = housekeeping.busy_batch_seconds
    pages = Pacer(rows=FIRST_PAGES_STEP, min_rows=10, busy_batch_seconds=busy)
    while housekeeping.free_pages() > 0:
        pressure = gauge.sample()
        started = time.perf_counter()
        step = housekeeping.give_back_pages(pages.rows)
        took = time.perf_counter() - started
        gauge.mark()
        if step == 0:
            break
        returned += step
        housekeeping.checkpoint_passive()
        time.sleep(pages.next_pause(step, took, pressure))
    housekeeping.checkpoint_passive()
    return returned


def parse_duration(text: str) -> timedelta:
    """`90d`, `36h`, `15m`, `30s`, or a plain number of days; never negative (every caller
    means a length of time: `-1d` as a pending age or `--since` was a day in the future)."""
    text = text.strip().lower()
    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    try:
        if text and text[-1] in units:
            duration = timedelta(seconds=float(text[:-1]) * units[text[-1]])
        else:
            duration = timedelta(days=float(text))
    except (ValueError, OverflowError) as exc:  # OverflowError: inf, 1e300, ...
        raise ConfigurationError(f"not a duration: {text!r} (use 90d, 36h, 15m or 30s)") from exc
    if duration < timedelta(0):
        raise ConfigurationError(f"{text!r} is not a positive duration (use 90d, 36h or 15m)")
    return duration


def format_duration(duration: timedelta) -> str:
    seconds = duration.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
