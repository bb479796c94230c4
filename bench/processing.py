"""Benchmark 2, processing: how fast hookinbox's workers drain events, and how soon they do.

    python bench/processing.py                  # everything, both backends, 3 runs: ~20 min
    python bench/processing.py --backends sqlite --runs 1 --processes 1 --events 2000
    python bench/processing.py --scenarios mixed --mixed-workers 0,2   # the mixed one alone
    python bench/processing.py --smoke          # seconds; what CI runs to keep this working

For each backend (SQLite, PostgreSQL; MariaDB with `--backends mysql`, not by default):
- drain: `--events` pending events are bulk-inserted into `hookinbox_events` (the columns the
  ingest upsert writes, in one transaction, committed once the workers are up and idle), then
  K = 1, 2, 4 `hookinbox worker bench.peers.hookinbox_app:inbox` processes (default
  concurrency, 4 threads each) process them: events/s from that commit to the last
  `processed_at`;
- the bare loop: the same events, the same work by the simplest correct code, in one process
  (SQLAlchemy Core on the same driver: psycopg 3 / sqlite3 / PyMySQL, SQLite in WAL with
  synchronous=FULL, MariaDB in READ COMMITTED, like hookinbox): read the pending events,
  then for each one transaction
  `UPDATE hookinbox_events SET status='processed' ... WHERE id=? AND status='pending'` + the
  handler's `INSERT INTO bench_orders`. hookinbox/bare is the ratio of the medians;
- end-to-end latency: `hookinbox serve` with its worker, an open-loop `--rate` for `--seconds`
  (separate process, pinned to the last CPU), then `processed_at - received_at` per event,
  p50/p99/max; and the same at `--idle-rate` (the worker idles between events: wake-up cost).
  Both timestamps are hookinbox's: `received_at` is taken when the delivery is verified,
  `processed_at` at the claim (the start of the processing transaction, before the handler
  runs and commits);
- mixed (issue 20): can the workers keep up while ingest runs? First the ingest ceiling:
  hookinbox's own requests/s on that backend, measured as bench/ingest.py does (one
  `hookinbox serve --no-worker` process on a fresh database, the median of `--runs` wrk
  runs, 64 connections, `--mixed-ceiling-seconds`), unless `--mixed-ceiling` gives it. Then,
  on another fresh database, `hookinbox serve` (one server process) with its own worker
  (`--mixed-workers 0`, the default) or with K separate `hookinbox worker` processes
  (`--mixed-workers K`, as the drain above) receives `--mixed-fraction` (default 0.5) x the
  ceiling, open loop
  (`_loadgen.py`, `--mixed-generators` processes sharing the rate), for `--mixed-seconds`,
  while a thread counts the backlog, the events pending, deferred or processing, with SQL
  every `--mixed-sample-every` seconds (`_backlog.py`). Reported: offered requests/s (sent by
  the generators, beside the rate asked of them: a generator that falls behind shows there),
  accepted (events stored) and processed (events that left the backlog) per second of the run,
  the backlog at 25/50/75/100 % of the run and its maximum, the ingest p99 (open loop, from
  each request's due time), and the verdict: **bounded** when the backlog at the end is at
  most the larger of the backlog at two thirds of the run and 2 s of the offered load (the
  workers kept up, or the backlog stopped growing before the last third), else NOT bounded.
  Every sample is in the raw JSON (`series`).
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._backlog import SLACK_SECONDS, BacklogSampler, backlog_report
from bench._common import (
    ROOT,
    Load,
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    sa_url,
    save,
    server,
    sign,
    stripe_body,
    summary,
    wrk,
)
from bench.peers.hookinbox_app import create_tables, orders
from hookinbox._storage import Store
from hookinbox._storage._schema import events, payloads

APP = "bench.peers.hookinbox_app:inbox"
DEFAULT_EVENTS = {"sqlite": 1_200, "postgres": 2_000, "mysql": 2_000}
"""About 10 s of work for one worker process on the reference machine (2 cores)."""
OPEN = ("pending", "deferred", "processing")
ASYNC_SCHEMES = {"postgresql://": "postgresql+asyncpg://", "sqlite:///": "sqlite+aiosqlite:///"}
"""The async worker's URL of each database (bench/async_worker.py)."""
SCENARIOS = ("drain", "latency", "mixed")


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
        payload_keys = ("body", "headers")
        with engine.begin() as connection:
            for start in range(0, len(rows), 2_000):
                chunk = rows[start : start + 2_000]
                plain = [{k: v for k, v in row.items() if k not in payload_keys} for row in chunk]
                connection.execute(events.insert(), plain)
                # Each event's payload beside it, by the id its insert gave it (schema 14).
                ids = dict(
                    connection.execute(
                        sa.select(events.c.event_id, events.c.id).where(
                            events.c.event_id.in_([row["event_id"] for row in chunk])
                        )
                    ).all()
                )
                connection.execute(
                    payloads.insert(),
                    [{"id": ids[row["event_id"]], "body": row["body"],
                      "headers": row["headers"]} for row in chunk],
                )  # fmt: skip
        committed = time.time()
        if engine.dialect.name == "postgresql":
            # Fresh planner statistics, as autovacuum would have on a live table.
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                connection.execute(sa.text("ANALYZE hookinbox_events"))
        elif engine.dialect.name == "mysql":
            with engine.connect() as connection:  # InnoDB's persistent statistics, fresh
                connection.execute(sa.text("ANALYZE TABLE hookinbox_events")).all()
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


def worker_url(url: str, driver: str) -> str:
    """`url` as the workers are given it: with the database's async driver for `driver="async"`
    (the async worker; asyncpg on PostgreSQL), or the one `driver` names
    (`"psycopg_async"`), as it is for `"sync"`."""
    if driver == "sync":
        return url
    for sync, asynchronous in ASYNC_SCHEMES.items():
        if url.startswith(sync):
            if driver != "async":
                asynchronous = asynchronous.split("+")[0] + f"+{driver}://"
            return asynchronous + url[len(sync) :]
    raise ValueError(f"no async driver for {url}")


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


def drain(
    backend: str, processes: int, events_count: int, timeout: float, driver: str = "sync"
) -> dict[str, Any]:
    rows = pending_rows(events_count)
    with database(backend) as url:
        prepare(url)
        with workers(worker_url(url, driver), processes) as running:
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
        # hookinbox's session on MariaDB: READ COMMITTED, UTC (PyMySQL and utf8mb4 by sa_url)
        session = {"isolation_level": "READ COMMITTED"} if backend == "mysql" else {}
        engine = sa.create_engine(sa_url(url), poolclass=sa.NullPool, **session)
        if backend == "sqlite":

            @sa.event.listens_for(engine, "connect")
            def _durable(dbapi_connection: Any, _record: Any) -> None:
                dbapi_connection.execute("PRAGMA journal_mode=WAL")
                dbapi_connection.execute("PRAGMA synchronous=FULL")  # hookinbox's default

        elif backend == "mysql":

            @sa.event.listens_for(engine, "connect")
            def _utc(dbapi_connection: Any, _record: Any) -> None:
                with dbapi_connection.cursor() as cursor:
                    cursor.execute("SET time_zone = '+00:00'")

        started, cpu_started = time.perf_counter(), time.process_time()
        with engine.connect() as connection:
            pending = connection.execute(
                sa.select(events.c.id, payloads.c.body)
                .join_from(events, payloads, payloads.c.id == events.c.id)
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


def latency(backend: str, rate: float, seconds: float, driver: str = "sync") -> dict[str, Any]:
    """`hookinbox serve` with its worker, `rate` events/s open loop: accepted -> processed."""
    with (
        database(backend) as url,
        server(hookinbox_serve(APP, worker_url(url, driver), 1, worker=True)) as running,
    ):
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


def ingest_ceiling(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """hookinbox's own ingest requests/s on `backend` (`--mixed-ceiling` when given), measured
    as bench/ingest.py measures its hookinbox peer: `hookinbox serve --no-worker` (one server
    process, group commit) on a fresh database, a warm-up, then the median of `--runs` runs of
    wrk with 64 connections for `--mixed-ceiling-seconds`. At --smoke, 200/s open loop for 1 s
    instead (no wrk)."""
    if backend in args.mixed_ceiling:
        return {"rate": args.mixed_ceiling[backend], "measured": False}
    loads: list[Load] = []
    with database(backend) as url, server(hookinbox_serve(APP, url, 1)) as running:
        target = f"{running.base_url}/webhooks/stripe"
        warmup = request_file(200)
        fixed_rate(target, warmup, rate=100, seconds=1)
        warmup.unlink()
        for _ in range(args.runs):
            if args.smoke:
                requests = request_file(400)
                loads.append(fixed_rate(target, requests, rate=200, seconds=1))
            else:
                requests = request_file(max(20_000, 8_000 * args.mixed_ceiling_seconds))
                loads.append(wrk(target, requests, seconds=args.mixed_ceiling_seconds))
            requests.unlink()
    rates = summary([load.rate for load in loads])
    return {"rate": rates["median"], "rates": rates, "measured": True, "loads": loads}


def open_loop(target: str, files: list[Path], rate: float, seconds: float) -> list[Load]:
    """`rate` requests/s for `seconds`, shared among one load generator process per file (one
    Python process may not keep up with a few thousand a second: the run's `offered_rate`,
    what was sent, shows whether they did)."""
    share = rate / len(files)
    with ThreadPoolExecutor(len(files)) as pool:
        return list(
            pool.map(lambda path: fixed_rate(target, path, rate=share, seconds=seconds), files)
        )


def drained_by(separate_workers: int) -> str:
    if separate_workers == 0:
        return "serve's worker"
    return f"{separate_workers} worker process{'es' if separate_workers > 1 else ''}"


def mixed(
    backend: str, separate_workers: int, ceiling: float, args: argparse.Namespace
) -> dict[str, Any]:
    """Ingest at `--mixed-fraction` x `ceiling` for `--mixed-seconds` while the events are
    processed, by `hookinbox serve`'s own worker (`separate_workers` 0) or by that many
    `hookinbox worker` processes beside `serve --no-worker`; the backlog sampled throughout."""
    target_rate = args.mixed_fraction * ceiling
    seconds = args.mixed_seconds
    with (
        database(backend) as url,
        server(hookinbox_serve(APP, url, 1, worker=separate_workers == 0)) as running,
    ):
        drainers = workers(url, separate_workers) if separate_workers else nullcontext()
        with drainers:
            target = f"{running.base_url}/webhooks/stripe"
            warmup = request_file(50)
            fixed_rate(target, warmup, rate=50, seconds=1)
            warmup.unlink()
            wait_drained(url, 50, 60)
            share = int(target_rate * seconds / args.mixed_generators) + 1
            files = [request_file(share) for _ in range(args.mixed_generators)]
            with BacklogSampler(url, args.mixed_sample_every) as sampler:
                sampler.sample()  # the baseline, before the first request
                loads = open_loop(target, files, target_rate, seconds)
                finished = time.monotonic()
                sampler.sample()  # the end: every answer is in
            for path in files:
                path.unlink()
    # The load ran from its first due request to its last answer: the slowest generator's
    # `seconds` before the generators returned (their exit adds a few tens of ms).
    load_seconds = max(load.seconds for load in loads)
    sent = sum(load.requests for load in loads)
    return {
        "drained_by": drained_by(separate_workers),
        "separate_workers": separate_workers,
        "ceiling": ceiling,
        "fraction": args.mixed_fraction,
        "target_rate": target_rate,
        "generators": loads,
        "answers_not_2xx": sum(load.errors for load in loads),
        "ingest_p99_ms": max(load.p99_ms for load in loads),
        **backlog_report(
            sampler.samples,
            began=finished - load_seconds,
            finished=finished,
            offered_rate=sent / load_seconds,
        ),
    }


def folded(runs: list[dict[str, Any]], *keys: str) -> dict[str, Any]:
    return {key: summary([r[key] for r in runs]) for key in keys}


def measure_mixed(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    print(f"{backend}: mixed: ingest ceiling ...", file=sys.stderr, flush=True)
    ceiling = ingest_ceiling(backend, args)
    runs: dict[int, list[dict[str, Any]]] = {k: [] for k in args.mixed_workers}
    for run in range(args.runs):
        for k in args.mixed_workers:
            print(
                f"{backend} run {run + 1}: mixed, {args.mixed_fraction:.0%} of "
                f"{ceiling['rate']:.0f}/s for {args.mixed_seconds:.0f} s, {drained_by(k)} ...",
                file=sys.stderr,
                flush=True,
            )
            result = mixed(backend, k, ceiling["rate"], args)
            print(
                f"  backlog {result['backlog']}, max {result['backlog_max']}: "
                f"{'bounded' if result['bounded'] else 'NOT bounded'}",
                file=sys.stderr,
                flush=True,
            )
            runs[k].append(result)
    configurations = []
    for k, done in runs.items():
        marks = {mark: summary([r["backlog"][mark] for r in done]) for mark in done[0]["backlog"]}
        configurations.append(
            {
                "drained_by": drained_by(k),
                "runs": done,
                "bounded_runs": sum(r["bounded"] for r in done),
                "backlog": marks,
                "backlog_max": max(r["backlog_max"] for r in done),
                **folded(done, "offered_rate", "accepted_rate", "processed_rate", "ingest_p99_ms"),
            }
        )
    return {
        "ceiling": ceiling,
        "fraction": args.mixed_fraction,
        "seconds": args.mixed_seconds,
        "configurations": configurations,
    }


def render_drain(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
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
    lines.append(
        f"\nmedian of {args.runs} run(s), (min-max); drain: {args.events or 'default'} "
        "events per run; bare: one process, SQLAlchemy Core, one transaction per event"
    )
    return lines


def render_latency(results: list[dict[str, Any]]) -> list[str]:
    lines = [
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
    return lines


def render_mixed(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = [
        "| backend | drained by | ingest ceiling req/s | offered /s (asked) | accepted /s "
        "| processed /s | backlog at 25 / 50 / 75 / 100 % | max | ingest p99 ms | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["mixed"]
        ceiling = m["ceiling"]["rate"]
        measured = "" if m["ceiling"]["measured"] else " (given)"
        for c in m["configurations"]:
            marks = " / ".join(f"{c['backlog'][mark]['median']:.0f}" for mark in c["backlog"])
            runs = len(c["runs"])
            verdict = "bounded" if c["bounded_runs"] == runs else "NOT bounded"
            lines.append(
                f"| {r['backend']} | {c['drained_by']} | {ceiling:.0f}{measured} | "
                f"{c['offered_rate']['median']:.0f} ({m['fraction'] * ceiling:.0f}) | "
                f"{c['accepted_rate']['median']:.0f} | {c['processed_rate']['median']:.0f} | "
                f"{marks} | {c['backlog_max']} | {c['ingest_p99_ms']['median']:.1f} | "
                f"{verdict} ({c['bounded_runs']} of {runs}) |"
            )
    lines.append(
        f"\nmixed: ingest offered at {args.mixed_fraction:.0%} of the ceiling for "
        f"{args.mixed_seconds:.0f} s, median of {args.runs} run(s); backlog = events pending, "
        "deferred or processing; bounded = the backlog at the end is at most the larger of the "
        f"backlog at two thirds of the run and {SLACK_SECONDS:.0f} s of the offered load"
    )
    return lines


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    sections = []
    if "drain" in args.scenarios:
        sections.append(render_drain(results, args))
    if "latency" in args.scenarios:
        sections.append(render_latency(results))
    if "mixed" in args.scenarios:
        sections.append(render_mixed(results, args))
    return "\n\n".join("\n".join(lines) for lines in sections)


def measure_drain(backend: str, args: argparse.Namespace) -> dict[str, Any]:
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
    return {
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
    }


def measure_latency(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    moderate: list[dict[str, Any]] = []
    idle: list[dict[str, Any]] = []
    for run in range(args.runs):
        print(f"{backend} run {run + 1}: latency ...", file=sys.stderr, flush=True)
        moderate.append(latency(backend, args.rate, args.seconds))
        idle.append(latency(backend, args.idle_rate, args.idle_seconds))
    return {
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


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": backend}
    if "drain" in args.scenarios:
        result |= measure_drain(backend, args)
    if "latency" in args.scenarios:
        result |= measure_latency(backend, args)
    if "mixed" in args.scenarios:
        result["mixed"] = measure_mixed(backend, args)
    return result


def given_ceilings(text: str, backends: list[str]) -> dict[str, float]:
    """`--mixed-ceiling`: "" (measure each), "3000" (every backend) or "sqlite=2500,postgres=3100"
    (a backend left out is measured)."""
    if not text:
        return {}
    if "=" not in text:
        return dict.fromkeys(backends, float(text))
    pairs = (item.split("=", 1) for item in text.split(","))
    return {backend.strip(): float(rate) for backend, rate in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"any of {','.join(SCENARIOS)}"
    )
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
    parser.add_argument(
        "--mixed-fraction", type=float, default=0.5, help="ingest as a fraction of its ceiling"
    )
    parser.add_argument(
        "--mixed-ceiling",
        default="",
        help='ingest requests/s to take as the ceiling instead of measuring it: "3000" or '
        '"sqlite=2500,postgres=3100"',
    )
    parser.add_argument("--mixed-ceiling-seconds", type=int, default=10, help="wrk's run")
    parser.add_argument(
        "--mixed-seconds", type=float, default=60, help="ingest's run (at most 240: signatures)"
    )
    parser.add_argument(
        "--mixed-workers",
        default="0",
        help="what drains, one run each: 0 = serve's own worker, K = K `hookinbox worker` "
        "processes beside `serve --no-worker`",
    )
    parser.add_argument(
        "--mixed-generators", type=int, default=1, help="load generator processes sharing the rate"
    )
    parser.add_argument("--mixed-sample-every", type=float, default=1.0, help="seconds")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.events, args.seconds, args.idle_seconds = 1, 200, 1, 2
        args.rate = 50
        args.mixed_seconds, args.mixed_sample_every = 3, 0.5
    args.processes = [int(k) for k in str(args.processes).split(",")]
    args.scenarios = [s for s in str(args.scenarios).split(",") if s]
    if unknown := set(args.scenarios) - set(SCENARIOS):
        parser.error(f"unknown scenario(s) {','.join(sorted(unknown))}")
    if not 0 < args.mixed_fraction or not 0 < args.mixed_seconds <= 240:
        # Requests are signed before the run starts and Stripe's tolerance is 300 s.
        parser.error("--mixed-fraction must be above 0, --mixed-seconds within (0, 240]")
    args.mixed_workers = [int(k) for k in str(args.mixed_workers).split(",")]
    backends = args.backends.split(",")
    try:
        args.mixed_ceiling = given_ceilings(args.mixed_ceiling, backends)
    except ValueError:
        parser.error(f"--mixed-ceiling {args.mixed_ceiling!r}: a rate, or backend=rate,...")
    started = time.monotonic()
    results = [measure(backend, args) for backend in backends]
    table = render(results, args)
    path = save(
        "processing",
        {"settings": vars(args), "results": results, "wall_seconds": time.monotonic() - started},
    )
    print(table)
    print(f"\nraw results: {path} ({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
