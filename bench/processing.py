"""Benchmark 2, processing: how fast hookinbox's workers drain events, and how soon they do.

    python bench/processing.py                  # everything, both backends, 3 runs: ~12 min
    python bench/processing.py --backends sqlite --runs 1 --processes 1 --events 2000
    python bench/processing.py --smoke          # seconds; what CI runs to keep this working

For each backend (SQLite, PostgreSQL):
- drain: `--events` pending events are bulk-inserted into `hookinbox_events` (the columns the
  ingest upsert writes, in one transaction, committed once the workers are up and idle), then
  K = 1, 2, 4 `hookinbox worker bench.peers.hookinbox_app:inbox` processes (default
  concurrency, 4 threads each) process them: events/s from that commit to the last
  `processed_at`;
- the bare loop: the same events, the same work by the simplest correct code, in one process
  (SQLAlchemy Core on the same driver: psycopg 3 / sqlite3, SQLite in WAL with
  synchronous=FULL like hookinbox): read the pending events, then for each one transaction
  `UPDATE hookinbox_events SET status='processed' ... WHERE id=? AND status='pending'` + the
  handler's `INSERT INTO bench_orders`. hookinbox/bare is the ratio of the medians;
- end-to-end latency: `hookinbox serve` with its worker, an open-loop `--rate` for `--seconds`
  (separate process, pinned to the last CPU), then `processed_at - received_at` per event,
  p50/p99/max; and the same at `--idle-rate` (the worker idles between events: wake-up cost).
  Both timestamps are hookinbox's: `received_at` is taken when the delivery is verified,
  `processed_at` at the claim (the start of the processing transaction, before the handler
  runs and commits).
Medians of `--runs` runs, with min-max; raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import (
    ROOT,
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    save,
    server,
    sign,
    stripe_body,
    summary,
)
from bench.peers.hookinbox_app import create_tables, orders
from hookinbox._storage import Store
from hookinbox._storage._schema import events

APP = "bench.peers.hookinbox_app:inbox"
DEFAULT_EVENTS = {"sqlite": 1_200, "postgres": 2_000}
"""About 10 s of work for one worker process on the reference machine (2 cores)."""
OPEN = ("pending", "deferred", "processing")


def sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def prepare(url: str) -> None:
    """hookinbox's schema and the bench app's `bench_orders`, as `hookinbox serve` makes them."""
    store = Store(url, after_migrate=[create_tables])
    store.migrate()
    store.dispose()


def pending_rows(count: int) -> list[dict[str, Any]]:
    """What the ingest upsert writes for `count` new, distinct Stripe deliveries."""
    run = os.urandom(4).hex()
    start = datetime.now(UTC) - timedelta(milliseconds=count)
    rows = []
    for n in range(count):
        # Received 1 ms apart, as from live traffic: the due index then orders them by itself
        # (identical timestamps would make PostgreSQL sort every due row for each lease).
        now = start + timedelta(milliseconds=n)
        body = stripe_body(f"evt_{run}{n:09d}", f"pi_{run}{n:09d}")
        headers = {
            "content-type": "application/json",
            "stripe-signature": sign(body),
            "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        rows.append(
            {
                "source": "stripe",
                "event_id": f"evt_{run}{n:09d}",
                "event_type": "checkout.session.completed",
                "occurred_at": now.replace(microsecond=0),
                "received_at": now,
                "body": body,
                "headers": json.dumps(headers, sort_keys=True),
                "body_sha256": hashlib.sha256(body).hexdigest(),
                "status": "pending",
                "attempts": 0,
                "deferrals": 0,
                "next_attempt_at": now,
                "delivery_count": 1,
                "key_conflicts": 0,
                "last_delivery_at": now,
            }
        )
    return rows


def insert_pending(url: str, rows: list[dict[str, Any]]) -> float:
    """Insert `rows` in one transaction; returns the time it committed (all due from then)."""
    engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool)
    try:
        with engine.begin() as connection:
            for start in range(0, len(rows), 2_000):
                connection.execute(events.insert(), rows[start : start + 2_000])
        committed = time.time()
        if engine.dialect.name == "postgresql":
            # Fresh planner statistics, as autovacuum would have on a live table.
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.execute(sa.text("ANALYZE hookinbox_events"))
        return committed
    finally:
        engine.dispose()


def counts(url: str) -> dict[str, int]:
    engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                sa.select(events.c.status, sa.func.count()).group_by(events.c.status)
            ).all()
            effects = connection.execute(
                sa.select(sa.func.count(), sa.func.count(sa.distinct(orders.c.payment_id)))
            ).one()
    finally:
        engine.dispose()
    return {**{status: n for status, n in rows}, "effects": effects[0], "distinct": effects[1]}


def wait_drained(url: str, expected: int, timeout: float) -> None:
    engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool)
    query = sa.select(sa.func.count()).where(events.c.status.in_(OPEN))
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            with engine.connect() as connection:
                if connection.execute(query).scalar_one() == 0:
                    return
            time.sleep(0.25)
    finally:
        engine.dispose()
    raise RuntimeError(f"not drained within {timeout:.0f} s: {counts(url)} of {expected}")


def processed_times(url: str, prefix: str = "") -> list[tuple[datetime, datetime]]:
    """(received_at, processed_at) of every processed event whose id starts with `prefix`."""
    engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool)
    query = sa.select(events.c.received_at, events.c.processed_at).where(
        events.c.status == "processed", events.c.event_id.startswith(prefix)
    )
    try:
        with engine.connect() as connection:
            return [(r, p) for r, p in connection.execute(query).all()]
    finally:
        engine.dispose()


def fsync_ms(samples: int = 100) -> float:
    """The disk's write + fdatasync latency right now: every commit pays one (variable on VMs)."""
    path = Path(tempfile.gettempdir()) / f"bench-fsync-{os.getpid()}"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        started = time.perf_counter()
        for _ in range(samples):
            os.write(descriptor, b"x" * 4096)
            os.fdatasync(descriptor)
        return (time.perf_counter() - started) * 1000 / samples
    finally:
        os.close(descriptor)
        path.unlink()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


@contextmanager
def workers(url: str, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """`count` `hookinbox worker` processes, running their loops when this yields."""
    command = [
        sys.executable,
        "-m",
        "hookinbox",
        "worker",
        APP,
        "--database-url",
        url,
        "--log-level",
        "warning",
        *os.environ.get("BENCH_WORKER_ARGS", "").split(),  # e.g. "--concurrency 1"
    ]
    log = Path(tempfile.gettempdir()) / f"bench-processing-workers-{os.getpid()}.log"
    with log.open("ab") as out:
        started = [
            subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            for _ in range(count)
        ]
    try:
        deadline = time.monotonic() + 60
        # Worker.run() starts its loop threads after the schema check: main + events + relay
        # loops (+ the daily pruner, + LISTEN on PostgreSQL).
        while not all(threads(p.pid) >= 3 for p in started):
            if any(p.poll() is not None for p in started):
                raise RuntimeError(f"a worker exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError("workers did not start within 60 s")
            time.sleep(0.05)
        time.sleep(0.5)  # first poll done: idle
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def drain(backend: str, processes: int, events_count: int, timeout: float) -> dict[str, Any]:
    rows = pending_rows(events_count)
    with database(backend) as url:
        prepare(url)
        with workers(url, processes) as running:
            cpu_before = sum(cpu_seconds(p.pid) for p in running)
            committed = insert_pending(url, rows)
            wait_drained(url, events_count, timeout)
            cpu = sum(cpu_seconds(p.pid) for p in running) - cpu_before
        done = processed_times(url)
        found = counts(url)
    last = max(p for _, p in done).timestamp()
    first = min(p for _, p in done).timestamp()
    seconds = last - committed
    return {
        "fsync_ms": fsync_ms(),
        "processes": processes,
        "events": events_count,
        "seconds": seconds,
        "rate": events_count / seconds,
        "start_lag_ms": (first - committed) * 1000,
        "worker_cpu_ms_per_event": cpu * 1000 / events_count,
        "counts": found,
        "correct": found.get("processed") == events_count == found["distinct"] == found["effects"],
    }


def bare_loop(backend: str, events_count: int) -> dict[str, Any]:
    """The same work by the simplest correct code: one process, one transaction per event."""
    rows = pending_rows(events_count)
    with database(backend) as url:
        prepare(url)
        insert_pending(url, rows)
        engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool)
        if backend == "sqlite":

            @sa.event.listens_for(engine, "connect")
            def _durable(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
                dbapi_connection.execute("PRAGMA synchronous=FULL")  # hookinbox's default

        started, cpu_started = time.perf_counter(), time.process_time()
        with engine.connect() as connection:
            pending = connection.execute(
                sa.select(events.c.id, events.c.body)
                .where(events.c.status == "pending", events.c.next_attempt_at <= datetime.now(UTC))
                .order_by(events.c.next_attempt_at, events.c.id)
            ).all()
            connection.commit()
            for row_id, body in pending:
                payment = json.loads(body)["data"]["object"]["payment_intent"]
                with connection.begin():
                    claimed = connection.execute(
                        events.update()
                        .where(events.c.id == row_id, events.c.status == "pending")
                        .values(
                            status="processed",
                            outcome="handled",
                            attempts=events.c.attempts + 1,
                            processed_at=datetime.now(UTC),
                        )
                    )
                    if claimed.rowcount == 1:
                        connection.execute(orders.insert().values(payment_id=payment))
        seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        engine.dispose()
        found = counts(url)
    return {
        "fsync_ms": fsync_ms(),
        "events": events_count,
        "seconds": seconds,
        "rate": events_count / seconds,
        "cpu_ms_per_event": cpu * 1000 / events_count,
        "counts": found,
        "correct": found.get("processed") == events_count == found["distinct"] == found["effects"],
    }


@contextmanager
def pinned_to_last_cpu() -> Iterator[None]:
    """Children started inside (the load generator) run on the last CPU only."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(backend: str, rate: float, seconds: float) -> dict[str, Any]:
    """`hookinbox serve` with its worker, `rate` events/s open loop: accepted -> processed."""
    with database(backend) as url, server(hookinbox_serve(APP, url, 1, worker=True)) as running:
        target = f"{running.base_url}/webhooks/stripe"
        with pinned_to_last_cpu():
            warmup = request_file(50)
            fixed_rate(target, warmup, rate=50, seconds=1)
            warmup.unlink()
            wait_drained(url, 50, 30)
            requests = request_file(int(rate * seconds))
            with requests.open("rb") as lines:
                prefix = json.loads(lines.readline().split(b"\t", 1)[1])["id"][:12]
            load = fixed_rate(target, requests, rate=rate, seconds=seconds)
            requests.unlink()
        wait_drained(url, load.requests, 60)
        times = processed_times(url, prefix)
    latencies = [(p - r).total_seconds() * 1000 for r, p in times]
    return {
        "rate": rate,
        "seconds": seconds,
        "events": len(latencies),
        "answers_not_2xx": load.errors,
        "ingest_p99_ms": load.p99_ms,
        "p50_ms": percentile(latencies, 0.50),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
        "mean_ms": statistics.fmean(latencies),
    }


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "| backend | drained by | events/s (median, min-max) | vs bare | worker CPU ms/event "
        "| correct |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        bare = r["bare"]["rate"]["median"]
        for d in r["drain"]:
            rate = d["rate"]
            lines.append(
                f"| {r['backend']} | {d['processes']} worker process"
                f"{'es' if d['processes'] > 1 else ''} x {d['concurrency']} threads | "
                f"{rate['median']:.0f} ({rate['min']:.0f}-{rate['max']:.0f}) | "
                f"{rate['median'] / bare:.2f}x | {d['cpu_ms_per_event']['median']:.2f} | "
                f"{'yes' if d['correct'] else 'NO'} |"
            )
        b = r["bare"]
        lines.append(
            f"| {r['backend']} | bare loop, 1 process | {bare:.0f} ({b['rate']['min']:.0f}-"
            f"{b['rate']['max']:.0f}) | 1.00x | {b['cpu_ms_per_event']['median']:.2f} | "
            f"{'yes' if b['correct'] else 'NO'} |"
        )
    lines += [
        "",
        "| backend | rate | events | accepted -> processed p50 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for name in ("moderate", "idle"):
            m = r[name]
            lines.append(
                f"| {r['backend']} | {m['rate']:.0f}/s for {m['seconds']:.0f} s | {m['events']} "
                f"| {m['p50_ms']['median']:.1f} ({m['p50_ms']['min']:.1f}-{m['p50_ms']['max']:.1f})"
                f" | {m['p99_ms']['median']:.1f} ({m['p99_ms']['min']:.1f}-"
                f"{m['p99_ms']['max']:.1f}) | {m['max_ms']['max']:.1f} |"
            )
    lines.append(
        f"\nmedian of {args.runs} run(s), (min-max); drain: {args.events or 'default'} "
        "events per run; bare: one process, SQLAlchemy Core, one transaction per event"
    )
    return "\n".join(lines)


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    count = args.events or DEFAULT_EVENTS[backend]
    timeout = max(120.0, count / 50)
    drains: dict[int, list[dict[str, Any]]] = {k: [] for k in args.processes}
    bares: list[dict[str, Any]] = []
    for run in range(args.runs):
        for k in args.processes:
            print(f"{backend} run {run + 1}: drain {count} by {k} ...", file=sys.stderr, flush=True)
            drains[k].append(drain(backend, k, count, timeout))
        print(f"{backend} run {run + 1}: bare loop ...", file=sys.stderr, flush=True)
        bares.append(bare_loop(backend, count))
    moderate: list[dict[str, Any]] = []
    idle: list[dict[str, Any]] = []
    for run in range(args.runs):
        print(f"{backend} run {run + 1}: latency ...", file=sys.stderr, flush=True)
        moderate.append(latency(backend, args.rate, args.seconds))
        idle.append(latency(backend, args.idle_rate, args.idle_seconds))

    def folded(runs: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
        return {key: summary([r[key] for r in runs]) for key in keys}

    return {
        "backend": backend,
        "events": count,
        "drain": [
            {
                "processes": k,
                "concurrency": 4,
                "runs": drains[k],
                "correct": all(r["correct"] for r in drains[k]),
                **folded(drains[k], "rate", "start_lag_ms"),
                "cpu_ms_per_event": summary([r["worker_cpu_ms_per_event"] for r in drains[k]]),
            }
            for k in args.processes
        ],
        "bare": {
            "runs": bares,
            "correct": all(r["correct"] for r in bares),
            **folded(bares, "rate", "cpu_ms_per_event"),
        },
        "moderate": {
            "runs": moderate,
            "rate": args.rate,
            "seconds": args.seconds,
            "events": moderate[0]["events"],
            **folded(moderate, "p50_ms", "p99_ms", "max_ms"),
        },
        "idle": {
            "runs": idle,
            "rate": args.idle_rate,
            "seconds": args.idle_seconds,
            "events": idle[0]["events"],
            **folded(idle, "p50_ms", "p99_ms", "max_ms"),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--processes", default="1,2,4", help="worker process counts to drain with")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--events",
        type=int,
        default=0,
        help=f"events to drain per run [default: {DEFAULT_EVENTS}, ~10 s for one process]",
    )
    parser.add_argument("--rate", type=float, default=100, help="moderate rate, events/s")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--idle-rate", type=float, default=5, help="a rate that leaves it idle")
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.events, args.seconds, args.idle_seconds = 1, 200, 1, 2
        args.rate = 50
    args.processes = [int(k) for k in str(args.processes).split(",")]
    started = time.monotonic()
    results = [measure(backend, args) for backend in args.backends.split(",")]
    table = render(results, args)
    path = save(
        "processing",
        {"settings": vars(args), "results": results, "wall_seconds": time.monotonic() - started},
    )
    print(table)
    print(f"\nraw results: {path} ({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
