"""Benchmark: CPU per event, in the application and in PostgreSQL, for the capacity model.

    python bench/capacity.py                 # 3 runs, ~5-10 min (the drains dominate)
    python bench/capacity.py --runs 1 --seconds 5
    python bench/capacity.py --smoke         # seconds; what CI runs to keep this working

docs/deployment.md sizes a deployment from per-core rates: how many events one application
core receives and processes, and how many one PostgreSQL core stores and serves to workers.
Throughput on a shared 2-core machine mixes the three (server, worker, PostgreSQL and the load
generator take turns on the same cores); CPU time per event does not, so this measures that:

1. ingest: `hookinbox serve --no-worker` on a fresh PostgreSQL database, saturated by wrk (64
   connections, `--seconds`); CPU seconds of the server process and of the PostgreSQL backends
   serving this database (from /proc), divided by the deliveries stored;
2. processing: one `hookinbox worker` (default concurrency) drains them; CPU seconds of the
   worker and of the backends, divided by the events processed.
The application is bench/peers/hookinbox_app.py (a handler inserting one order row). Not
counted: PostgreSQL's background processes (WAL writer, checkpointer, autovacuum), which the
docs' model covers with headroom. Medians of `--runs`, raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import ROOT, database, hookinbox_serve, request_file, save, server, wrk
from bench.processing import APP, cpu_seconds, wait_drained

WORKER = [sys.executable, "-m", "hookinbox", "worker", APP, "--log-level", "warning"]


def backends(url: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend connected to `url`'s database."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1),
                              poolclass=sa.NullPool)  # fmt: skip
    with engine.connect() as connection:
        pids = connection.execute(
            sa.text(
                "SELECT pid FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ).scalars()
        found = {}
        for pid in pids:
            try:
                found[pid] = cpu_seconds(pid)
            except (FileNotFoundError, ProcessLookupError):
                continue
    engine.dispose()
    return found


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU the backends spent between two snapshots (a backend born since counts in full)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def stored(url: str) -> int:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1),
                              poolclass=sa.NullPool)  # fmt: skip
    with engine.connect() as connection:
        count = connection.execute(sa.text("SELECT count(*) FROM hookinbox_events")).scalar_one()
    engine.dispose()
    return int(count)


def one_run(seconds: int, connections: int) -> dict[str, Any]:
    requests = request_file(6_000 * (seconds + 1))  # each a distinct event; more than wrk sends
    try:
        with database("postgres") as url:
            with server(hookinbox_serve(APP, url)) as running:
                target = running.base_url + "/webhooks/stripe"
                wrk(target, requests, seconds=1, connections=connections)  # warm-up
                warm = stored(url)
                app_before = sum(cpu_seconds(pid) for pid in running.pids)
                db_before = backends(url)
                load = wrk(target, requests, seconds=seconds, connections=connections)
                db_after = backends(url)
                app_cpu = sum(cpu_seconds(pid) for pid in running.pids) - app_before
            deliveries = stored(url) - warm
            ingest_db_cpu = spent(db_before, db_after)
            total = stored(url)
            worker = subprocess.Popen(
                [*WORKER, "--database-url", url],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
            try:
                time.sleep(0.5)
                db_before = backends(url)
                worker_before = cpu_seconds(worker.pid)
                started = time.monotonic()
                wait_drained(url, total, timeout=600)
                drain_seconds = time.monotonic() - started
                worker_cpu = cpu_seconds(worker.pid) - worker_before
                db_after = backends(url)
            finally:
                worker.terminate()
                worker.wait(timeout=60)
            process_db_cpu = spent(db_before, db_after)
    finally:
        requests.unlink()
    return {
        "deliveries": deliveries,
        "ingest_rate": load.rate,
        "ingest_app_ms": app_cpu * 1000 / deliveries,
        "ingest_db_ms": ingest_db_cpu * 1000 / deliveries,
        "events": total,
        "process_rate": total / drain_seconds,
        "process_app_ms": worker_cpu * 1000 / total,
        "process_db_ms": process_db_cpu * 1000 / total,
    }


def render(runs: list[dict[str, Any]]) -> str:
    def med(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    rows = [
        ("receive and store (`serve`)", "ingest_app_ms", "ingest_db_ms"),
        ("process (`worker`, one handler insert)", "process_app_ms", "process_db_ms"),
    ]
    out = [
        "| step | application CPU ms/event | PostgreSQL CPU ms/event"
        " | events/s per application core | events/s per PostgreSQL core |",
        "|---|---|---|---|---|",
    ]
    for label, app, db in rows:
        out.append(
            f"| {label} | {med(app):.2f} | {med(db):.2f} | {1000 / med(app):,.0f}"
            f" | {1000 / med(db):,.0f} |"
        )
    both_app = med("ingest_app_ms") + med("process_app_ms")
    both_db = med("ingest_db_ms") + med("process_db_ms")
    out.append(
        f"| both | {both_app:.2f} | {both_db:.2f}"
        f" | {1000 / both_app:,.0f} | {1000 / both_db:,.0f} |"
    )
    out.append("")
    out.append(
        f"Runs: {len(runs)}; medians. Deliveries per run {med('deliveries'):,.0f} at "
        f"{med('ingest_rate'):,.0f}/s (wrk, 64 connections); drained at "
        f"{med('process_rate'):,.0f} events/s by one worker process."
    )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="one run of 1 s, 4 connections")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.seconds, args.connections = 1, 1, 4
    runs = [one_run(args.seconds, args.connections) for _ in range(args.runs)]
    print(render(runs))
    path = save("capacity", {"runs": runs})
    print(f"\nraw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
