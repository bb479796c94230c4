"""Benchmark: the async worker against the thread worker and a bare asyncpg loop, in one run.

    python bench/async_worker.py                     # PostgreSQL, 3 runs: ~5 min
    python bench/async_worker.py --runs 1 --events 1000
    python bench/async_worker.py --backends sqlite,postgres
    python bench/async_worker.py --smoke             # seconds; what CI runs to keep this working

For each backend, each run, one after another (so that a loaded machine weighs on all alike):
- drain (bench/processing.py's): `--events` pending events bulk-inserted, then ONE worker
  process drains them, first the thread worker (`postgresql://`: psycopg, 4 threads), then the
  async worker (`postgresql+asyncpg://`: 4 tasks on one event loop, uvloop's), each running
  bench/peers/hookinbox_app.py's handler (one INSERT; `await`ed on the async worker): events/s
  from the commit to the last `processed_at`, and the worker process's CPU ms per event;
- the bare async loop (PostgreSQL): the same events, the same work, by hand on asyncpg in one
  process and one connection: read the pending events, then for each one transaction
  `UPDATE hookinbox_events SET status='processed' ... WHERE id=$1 AND status='pending'` + the
  handler's `INSERT INTO bench_orders`. What a team would write without hookinbox;
- idle latency (`--idle-rate` events/s for `--idle-seconds`): `hookinbox serve` with its worker
  on each URL, accepted -> processed p50 / p99 (bench/processing.py's `latency`).

Reported: async/thread and async/bare ratios of the medians, with the min-max of each; raw JSON
under bench/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import database, save, summary
from bench.processing import (
    DEFAULT_EVENTS,
    counts,
    drain,
    insert_pending,
    latency,
    pending_rows,
    prepare,
)

DRIVERS = ("sync", "async")
"""The thread worker, and the async worker on the database's async driver (asyncpg on
PostgreSQL); `--psycopg-async` adds psycopg's async mode on PostgreSQL."""
NAMES = {
    "sync": "thread worker, 4 threads",
    "async": "async worker (asyncpg), 4 tasks",
    "psycopg_async": "async worker (psycopg async), 4 tasks",
}


def bare_async_loop(backend: str, events_count: int) -> dict[str, Any]:
    """The same work by hand on asyncpg: one process, one connection, one transaction per
    event (PostgreSQL only: asyncpg is a PostgreSQL driver)."""
    import asyncpg

    rows = pending_rows(events_count)
    with database(backend) as url:
        prepare(url)
        insert_pending(url, rows)

        async def run() -> tuple[float, float]:
            connection = await asyncpg.connect(url)
            started, cpu_started = time.perf_counter(), time.process_time()
            pending = await connection.fetch(
                "SELECT e.id, p.body FROM hookinbox_events e JOIN hookinbox_payloads p USING (id)"
                " WHERE e.status = 'pending' AND e.next_attempt_at <= $1"
                " ORDER BY e.next_attempt_at, e.id",
                datetime.now(UTC),
            )
            for row in pending:
                payment = json.loads(row["body"])["data"]["object"]["payment_intent"]
                async with connection.transaction():
                    claimed = await connection.execute(
                        "UPDATE hookinbox_events SET status = 'processed', outcome = 'handled',"
                        " attempts = attempts + 1, processed_at = $2"
                        " WHERE id = $1 AND status = 'pending'",
                        row["id"],
                        datetime.now(UTC),
                    )
                    if claimed == "UPDATE 1":
                        await connection.execute(
                            "INSERT INTO bench_orders (payment_id) VALUES ($1)", payment
                        )
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            await connection.close()
            return seconds, cpu

        seconds, cpu = _on_uvloop(run())
        found = counts(url)
    return {
        "events": events_count,
        "seconds": seconds,
        "rate": events_count / seconds,
        "cpu_ms_per_event": cpu * 1000 / events_count,
        "counts": found,
        "correct": found.get("processed") == events_count == found["distinct"] == found["effects"],
    }


def _on_uvloop(coroutine: Any) -> Any:
    """As `hookinbox worker` runs an async URL: on uvloop where it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coroutine)


def measure(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    count = args.events or DEFAULT_EVENTS[backend]
    timeout = max(120.0, count / 20)
    drivers = DRIVERS + (("psycopg_async",) if args.psycopg_async and backend == "postgres" else ())
    drains: dict[str, list[dict[str, Any]]] = {driver: [] for driver in drivers}
    idle: dict[str, list[dict[str, Any]]] = {driver: [] for driver in drivers}
    bares: list[dict[str, Any]] = []
    for run in range(args.runs):
        for driver in drivers:
            print(f"{backend} run {run + 1}: drain {count}, {driver} worker ...", file=sys.stderr,
                  flush=True)  # fmt: skip
            drains[driver].append(drain(backend, 1, count, timeout, driver))
        if backend == "postgres":
            print(f"{backend} run {run + 1}: bare asyncpg loop ...", file=sys.stderr, flush=True)
            bares.append(bare_async_loop(backend, count))
        if args.idle_seconds > 0:
            for driver in drivers:
                print(f"{backend} run {run + 1}: idle latency, {driver} worker ...",
                      file=sys.stderr, flush=True)  # fmt: skip
                idle[driver].append(latency(backend, args.idle_rate, args.idle_seconds, driver))
    return {
        "backend": backend,
        "events": count,
        "drain": {
            driver: {
                "runs": drains[driver],
                "correct": all(r["correct"] for r in drains[driver]),
                "rate": summary([r["rate"] for r in drains[driver]]),
                "cpu_ms_per_event": summary([r["worker_cpu_ms_per_event"] for r in drains[driver]]),
            }
            for driver in drivers
        },
        "bare_async": {
            "runs": bares,
            "correct": all(r["correct"] for r in bares),
            "rate": summary([r["rate"] for r in bares]) if bares else None,
            "cpu_ms_per_event": summary([r["cpu_ms_per_event"] for r in bares]) if bares else None,
        },
        "idle": {
            driver: {
                "runs": idle[driver],
                "p50_ms": summary([r["p50_ms"] for r in idle[driver]]) if idle[driver] else None,
                "p99_ms": summary([r["p99_ms"] for r in idle[driver]]) if idle[driver] else None,
            }
            for driver in drivers
        },
    }


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        "| backend | drained by (1 process) | events/s (median, min-max) | vs thread worker "
        "| vs bare asyncpg | worker CPU ms/event | correct |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        thread = r["drain"]["sync"]["rate"]["median"]
        bare = r["bare_async"]["rate"]["median"] if r["bare_async"]["rate"] else None
        for driver, d in r["drain"].items():
            name = NAMES[driver]
            rate = d["rate"]
            versus_bare = f"{rate['median'] / bare:.2f}x" if bare else "-"
            lines.append(
                f"| {r['backend']} | {name} | {rate['median']:.0f} ({rate['min']:.0f}-"
                f"{rate['max']:.0f}) | {rate['median'] / thread:.2f}x | {versus_bare} | "
                f"{d['cpu_ms_per_event']['median']:.2f} | {'yes' if d['correct'] else 'NO'} |"
            )
        if bare:
            b = r["bare_async"]
            lines.append(
                f"| {r['backend']} | bare asyncpg loop, 1 connection | {bare:.0f} "
                f"({b['rate']['min']:.0f}-{b['rate']['max']:.0f}) | - | 1.00x | "
                f"{b['cpu_ms_per_event']['median']:.2f} | {'yes' if b['correct'] else 'NO'} |"
            )
    if args.idle_seconds > 0:
        lines += [
            "",
            f"Idle accepted -> processed ({args.idle_rate:g}/s for {args.idle_seconds:g} s, "
            "`hookinbox serve` with its worker):",
            "",
            "| backend | worker | p50 ms (median, min-max) | p99 ms |",
            "|---|---|---|---|",
        ]
        for r in results:
            for driver, m in r["idle"].items():
                lines.append(
                    f"| {r['backend']} | {driver} | {m['p50_ms']['median']:.1f} "
                    f"({m['p50_ms']['min']:.1f}-{m['p50_ms']['max']:.1f}) | "
                    f"{m['p99_ms']['median']:.1f} |"
                )
    lines.append(f"\nmedian of {args.runs} run(s), (min-max)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="postgres")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--events", type=int, default=0, help="default: bench/processing.py's")
    parser.add_argument("--idle-rate", type=float, default=5)
    parser.add_argument("--idle-seconds", type=float, default=10, help="0: no latency runs")
    parser.add_argument(
        "--psycopg-async", action="store_true", help="also psycopg's async mode (PostgreSQL)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.events, args.idle_seconds = 1, 100, 2
    results = [measure(backend, args) for backend in args.backends.split(",")]
    print(render(results, args))
    path = save("async_worker", {"args": vars(args), "results": results})
    print(f"\nraw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
