"""Prometheus metrics: counters and histograms per process, gauges read from the database.

Counters and histograms (deliveries, key conflicts, processing attempts, latencies) live in
the process that counts them. `hookinbox serve` runs several processes (HTTP servers, the
worker), so it sets PROMETHEUS_MULTIPROC_DIR before any of them starts and `/metrics` sums the
files every process writes: prometheus_client's multiprocess mode. That mode is chosen when
prometheus_client is first imported, which is why this module imports it lazily.

Gauges (pending, oldest pending age, failed, deferred, duplicate ratio) are not counted but
read from the database on each scrape, so they are right whichever process answers and
whichever process changed them.

Every label value is bounded by the configuration, never by what senders send. An event's
type comes from the (verified) delivery, and a sender may use any number of types, so the
`type` label keeps only the types the application has handlers for (per source) and counts
every other type as `other`. Handlers register at import time, and every process that counts
(the HTTP servers, the worker) imports the application, so all of them fold alike.

prometheus_client is an extra (`hookinbox[metrics]`, also brought by `[server]`). Without it
every count is a no-op, and `/metrics` and `--metrics-port` say which extra to install.
"""

from __future__ import annotations

import atexit
import bisect
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from hookinbox._errors import HookinboxError, StoreUnavailable
from hookinbox._extras import installed, require
from hookinbox._logging import logger
from hookinbox._model import Status

if TYPE_CHECKING:
    from hookinbox._records import Gauges

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2000)

METRICS_MISSING_STATUS = 501
"""`/metrics` without prometheus_client: the server cannot do what was asked (Not Implemented),
and the one-line body names the extra."""

OTHER_TYPE = "other"
"""The `type` label of every event type no handler is registered for."""

_lock = threading.Lock()
_instruments: dict[str, Any] = {}
_handled_types: dict[str, frozenset[str]] = {}
"""Source name -> event types with a handler; replaced, never mutated, so reads need no lock."""


def label_event_type(source: str, event_type: str) -> None:
    """Give `event_type` of `source` a `type` label of its own (a handler was registered)."""
    with _lock:
        _handled_types[source] = _handled_types.get(source, frozenset()) | {event_type}


def type_label(source: str, event_type: str | None) -> str:
    """The `type` label: a handled type as it is, any other type `other`, no type empty."""
    if not event_type:
        return ""
    return event_type if event_type in _handled_types.get(source, ()) else OTHER_TYPE


class _Uncounted:
    """What an instrument is without prometheus_client: every call does nothing."""

    def labels(self, *_values: str) -> _Uncounted:
        return self

    def inc(self, _amount: float = 1) -> None:
        pass

    def observe(self, _value: float) -> None:
        pass


def _instrument(name: str) -> Any:
    if not _instruments:
        with _lock:
            if not _instruments:
                if installed("prometheus_client"):
                    _instruments.update(_create())
                else:
                    _instruments.update(dict.fromkeys(INSTRUMENTS, _Uncounted()))
    return _instruments[name]


INSTRUMENTS = (
    "deliveries", "key_conflicts", "ack_latency", "attempts", "messages", "delivery_latency",
    "processing_latency", "batch_size", "reconciled", "deadlock_retries",
)  # fmt: skip


def _create() -> dict[str, Any]:
    """Every instrument, or none: one that fails to register (a full disk under
    multiprocess mode) unregisters the others, so that the next call can try again."""
    from prometheus_client import REGISTRY

    created: dict[str, Any] = {}
    try:
        for name, build in _builders().items():
            created[name] = build()
    except Exception:
        for instrument in created.values():
            REGISTRY.unregister(instrument)
        raise
    return created


def _builders() -> dict[str, Callable[[], Any]]:
    from prometheus_client import Counter, Histogram

    return {
        "deliveries": lambda: Counter(
            "hookinbox_deliveries",
            "Webhook deliveries received, by outcome (accepted, duplicate, invalid_signature, ...)",
            ["source", "type", "outcome"],
        ),
        "key_conflicts": lambda: Counter(
            "hookinbox_key_conflicts",
            "Deliveries whose event id was known but whose body differed",
            ["source"],
        ),
        "ack_latency": lambda: Histogram(
            "hookinbox_ack_latency_seconds",
            "Time from a delivery's body read to its answer",
            ["source"],
            buckets=LATENCY_BUCKETS,
        ),
        "attempts": lambda: Counter(
            "hookinbox_processing_attempts",
            "Processing attempts, by outcome (processed, retried, deferred, failed, ...)",
            ["source", "type", "outcome"],
        ),
        "messages": lambda: Counter(
            "hookinbox_outbox_deliveries",
            "Outbox delivery attempts, by outcome (delivered, retried, failed, ...)",
            ["destination", "outcome"],
        ),
        "delivery_latency": lambda: Histogram(
            "hookinbox_outbox_delivery_latency_seconds",
            "Duration of one outbox delivery attempt",
            ["destination"],
            buckets=LATENCY_BUCKETS,
        ),
        "processing_latency": lambda: Histogram(
            "hookinbox_processing_latency_seconds",
            "Duration of one processing attempt",
            ["source"],
            buckets=LATENCY_BUCKETS,
        ),
        "reconciled": lambda: Counter(
            "hookinbox_reconciled",
            "Events reconcile found missing: stored, or asked of the provider again (GitHub)",
            ["source"],
        ),
        "deadlock_retries": lambda: Counter(
            "hookinbox_deadlock_retries",
            "Transactions of hookinbox's own run again after the database chose them as a "
            "deadlock's victim, by operation (ingest, reconcile, prune)",
            ["operation"],
        ),
        "auto_pauses": lambda: Counter(
            "hookinbox_source_auto_pauses",
            "Sources paused by the worker after their auto_pause_after consecutive failed attempts",
            ["source"],
        ),
        "batch_size": lambda: Histogram(
            "hookinbox_ingest_batch_size",
            "Events stored per transaction by group commit (a batched delivery counts each)",
            buckets=BATCH_BUCKETS,
        ),
    }


def count_delivery(
    source: str, event_type: str | None, outcome: str, seconds: float, *, key_conflict: bool
) -> None:
    _tally.delivery(source, type_label(source, event_type), outcome, seconds, key_conflict)


def count_attempt(source: str, event_type: str | None, outcome: str, seconds: float) -> None:
    _instrument("attempts").labels(source, type_label(source, event_type), outcome).inc()
    _instrument("processing_latency").labels(source).observe(seconds)


def count_message(destination: str, outcome: str, seconds: float) -> None:
    _instrument("messages").labels(destination, outcome).inc()
    _instrument("delivery_latency").labels(destination).observe(seconds)


def count_reconciled(source: str, events: int) -> None:
    if events:
        _instrument("reconciled").labels(source).inc(events)


def count_deadlock_retry(operation: str) -> None:
    _instrument("deadlock_retries").labels(operation).inc()


def count_auto_pause(source: str) -> None:
    _instrument("auto_pauses").labels(source).inc()


def observe_batch(size: int) -> None:
    _tally.batch(size)


class _Tally:
    """Ingest's counts, kept in plain dicts and added to prometheus_client once a second.

    A delivery is counted on the event loop, thousands of times a second. In multiprocess mode
    (`hookinbox serve`) every `inc` and `observe` takes a lock, checks the process id and
    writes a memory-mapped file: measured at about a tenth of a saturated server's CPU. Here a
    delivery costs one dict update under an uncontended lock; a daemon thread adds the sums to
    the instruments at most `FLUSH_EVERY` seconds later, and `exposition` adds them at once, so
    this process's `/metrics` is always current and another process's is at most a second
    behind. A histogram is kept as counts per bucket and a sum, and added as such: the one use
    of prometheus_client's private fields (`_sum`, `_buckets`), pinned by the metrics tests.
    """

    FLUSH_EVERY = 1.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deliveries: dict[tuple[str, str, str], int] = {}
        self._conflicts: dict[str, int] = {}
        self._latencies: dict[str, _Buckets] = {}
        self._batches = _Buckets(BATCH_BUCKETS)
        self._flusher: threading.Thread | None = None
        self._last_error: str | None = None

    def delivery(
        self, source: str, type_: str, outcome: str, seconds: float, key_conflict: bool
    ) -> None:
        key = (source, type_, outcome)
        with self._lock:
            self._deliveries[key] = self._deliveries.get(key, 0) + 1
            latencies = self._latencies.get(source)
            if latencies is None:
                latencies = self._latencies[source] = _Buckets(LATENCY_BUCKETS)
            latencies.add(seconds)
            if key_conflict:
                self._conflicts[source] = self._conflicts.get(source, 0) + 1
        if self._flusher is None:
            self._start()

    def batch(self, size: int) -> None:
        with self._lock:
            self._batches.add(size)
        if self._flusher is None:
            self._start()

    def flush_quietly(self) -> None:
        """`flush`, saying in one line (once per distinct error, never a traceback) why the
        counts could not be added: a full disk or a file-size limit on the multiprocess
        directory must not fill the log, nor reach a delivery."""
        try:
            self.flush()
        except Exception as error:
            message = f"{type(error).__name__}: {error}"
            if message != self._last_error:
                self._last_error = message
                logger("hookinbox.metrics").warning("metrics not counted: %s", message)
        else:
            self._last_error = None

    def flush(self) -> None:
        """Add what was counted since the last flush to the instruments."""
        with self._lock:
            deliveries, self._deliveries = self._deliveries, {}
            conflicts, self._conflicts = self._conflicts, {}
            latencies, self._latencies = self._latencies, {}
            batches, self._batches = self._batches, _Buckets(BATCH_BUCKETS)
        for labels, count in deliveries.items():
            _instrument("deliveries").labels(*labels).inc(count)
        for source, count in conflicts.items():
            _instrument("key_conflicts").labels(source).inc(count)
        for source, buckets in latencies.items():
            buckets.add_to(_instrument("ack_latency").labels(source))
        if batches.observed:  # an idle process creates no instrument (no file) at exit
            batches.add_to(_instrument("batch_size"))

    def forked(self) -> None:
        """In a forked child: the parent's counts are the parent's, and its thread is gone.
        (Asking `os.getpid()` per delivery instead is a system call each time.)"""
        self._lock = threading.Lock()
        self._deliveries, self._conflicts, self._latencies = {}, {}, {}
        self._batches = _Buckets(BATCH_BUCKETS)
        self._flusher = None

    def _start(self) -> None:
        with self._lock:
            if self._flusher is not None:
                return
            self._flusher = threading.Thread(
                target=self._run, name="hookinbox-metrics", daemon=True
            )
            self._flusher.start()
        # The first count of a process is added at once: the instruments and their files
        # exist from the first delivery on, as when every delivery was counted directly.
        self.flush_quietly()

    def _run(self) -> None:
        while True:
            time.sleep(self.FLUSH_EVERY)
            self.flush_quietly()


class _Buckets:
    """Observations of one histogram as prometheus_client stores them: a count per bucket
    (the first bound at or above the value; +Inf last) and their sum."""

    __slots__ = ("bounds", "counts", "observed", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.observed = 0

    def add(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value
        self.observed += 1

    def add_to(self, histogram: Any) -> None:
        if not self.observed:
            return
        buckets = getattr(histogram, "_buckets", None)
        if buckets is None:  # the instruments are no-ops (no prometheus_client)
            return
        histogram._sum.inc(self.total)
        for bucket, count in zip(buckets, self.counts, strict=True):
            if count:
                bucket.inc(count)


_tally = _Tally()
atexit.register(_tally.flush_quietly)


def flush_counts() -> None:
    """Add what this process counted so far to its instruments now: `hookinbox serve` does
    before it removes its multiprocess directory, so the exit's flush finds nothing to add."""
    _tally.flush_quietly()


os.register_at_fork(after_in_child=_tally.forked)


class GaugeSource(Protocol):
    """What the gauges are read from: the operations service (an inbox's figures, wherever
    they are stored), or a store (the receiver's `/metrics`). Named here, not as either, so
    that this module, which storage imports for its counters, imports neither back."""

    def gauges(self, now: datetime) -> Gauges: ...


class StoreCollector:
    """Gauges computed from the database at scrape time."""

    def __init__(self, source: GaugeSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily("hookinbox_store_up", "1 if the database answered this scrape")
        try:
            now = datetime.now(UTC)
            read = self.source.gauges(now)
        except StoreUnavailable:
            up.add_metric([], 0)
            yield up
            return
        figures = read.open
        messages = figures.outbox
        ratios = {"1h": read.last_hour, "1d": read.last_day}
        up.add_metric([], 1)
        yield up
        by_status = GaugeMetricFamily(
            "hookinbox_events", "Events not done yet, by status", labels=["status"]
        )
        for status in (Status.PENDING, Status.PROCESSING, Status.DEFERRED, Status.FAILED,
                       Status.STALE, Status.INVALID, Status.PAUSED):  # fmt: skip
            by_status.add_metric([status.value], figures.count(status))
        yield by_status
        live = GaugeMetricFamily(
            "hookinbox_live_workers",
            "Worker and relay processes whose heartbeat has not expired, by host and kind",
            labels=["host", "kind"],
        )
        for (host, kind), count in sorted(figures.workers.items()):
            live.add_metric([host, kind], count)
        yield live
        yield _age("hookinbox_oldest_pending_age_seconds", "Age of the oldest pending event",
                   figures.oldest_pending, now)  # fmt: skip
        yield _age("hookinbox_oldest_deferred_age_seconds", "Time the oldest deferred event has "
                   "waited for its predecessor", figures.oldest_deferred, now)  # fmt: skip
        yield GaugeMetricFamily(
            "hookinbox_not_ready_deadline_events",
            "Events failed because their predecessor never came (alarm on > 0)",
            value=figures.not_ready_deadline,
        )
        backlog = GaugeMetricFamily(
            "hookinbox_outbox_messages", "Outbox messages not delivered, by status",
            labels=["status"],
        )  # fmt: skip
        for message_status in ("pending", "delivering", "failed"):
            backlog.add_metric([message_status], messages.get(message_status, 0))
        yield backlog
        ratio = GaugeMetricFamily(
            "hookinbox_duplicate_ratio",
            "Duplicate deliveries / all deliveries: rising means the endpoint answers too slowly",
            labels=["window"],
        )
        for window, value in ratios.items():
            ratio.add_metric([window], value.ratio)
        yield ratio


def _age(name: str, documentation: str, since: datetime | None, now: datetime) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    seconds = (now - since).total_seconds() if since is not None else 0.0
    return GaugeMetricFamily(name, documentation, value=max(0.0, seconds))


def exposition(source: GaugeSource | None) -> tuple[bytes, str]:
    """The `/metrics` body: this process's (or every process's) counters, and the gauges.

    Without a store (Redis claim mode keeps no events) there are counters only. Without
    prometheus_client, `MissingExtra`: the HTTP layer answers it with `METRICS_MISSING_STATUS`.
    """
    require("/metrics", "metrics")
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

    _instrument("deliveries")  # registers the counters even before the first delivery
    _tally.flush()  # this process's counts are current; another's are at most a second old
    if os.environ.get(MULTIPROCESS_ENV):
        from prometheus_client import multiprocess

        counted = CollectorRegistry()
        multiprocess.MultiProcessCollector(counted)  # type: ignore[no-untyped-call]
    else:
        counted = REGISTRY
    gauges = CollectorRegistry()
    if source is not None:
        gauges.register(StoreCollector(source))
    return generate_latest(counted) + generate_latest(gauges), CONTENT_TYPE_LATEST


def serve_metrics(source: GaugeSource, port: int, host: str = "127.0.0.1") -> None:
    """Serve this process's metrics and the gauges on `port` (a worker run on its own)."""
    require("--metrics-port", "metrics")
    from prometheus_client import REGISTRY, start_http_server

    _instrument("deliveries")
    try:
        start_http_server(port, addr=host)
    except OSError as error:  # a busy port, most often: one line, not a traceback
        raise HookinboxError(
            f"cannot serve metrics on {host}:{port}: {error.strerror or error}"
        ) from error
    REGISTRY.register(StoreCollector(source))
