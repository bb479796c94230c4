"""Benchmark: heap-only. What does processing an event cost the database, as the inbox grows?

    python bench/heap_only.py                                  # 0 and 1M rows, vs 1b707b0
    python bench/heap_only.py --sizes 0,10m --batch 50000 --fill-factors 85:30,60:30,50:30
                                                               # issue 37's sustained drain
    python bench/heap_only.py --smoke                          # seconds; what CI runs

PostgreSQL only (heap-only updates and the write-ahead log are PostgreSQL's). For each size N,
one fresh database gets N events already in the inbox (`bench/growth.py`'s rows: 100 days of
Stripe-shaped events, 98.7 % processed), then `VACUUM (ANALYZE)` and a checkpoint, and then,
one after the other on that same database:

- **baseline**: the schema and the worker of `--baseline-ref` (a git ref checked out with `git
  worktree add`: the code before issue 37, schema 8), started as `hookinbox worker` processes
  from that tree;
- **this tree**: the database migrated to this tree's schema (the step is timed: the upgrade of
  a filled inbox), vacuumed and checkpointed again so both sides start from the same state, and
  the same drain with this tree's workers; with `--fill-factors`, once per pair of fill factors
  (events:queue) set before the drain (they apply to the pages the drain's events are written
  to).

A drain: `--batch` pending events inserted in one transaction, `--worker-processes` workers
draining them; the clock runs from the commit to the last `processed_at`. Autovacuum is off on
hookinbox's tables during the drains: nothing vacuums between them, as on a busy day between
two autovacuum runs. Around each drain the benchmark reads, from the commit of the batch to the
end of the drain, the write-ahead log written (`pg_current_wal_lsn()`), and after the workers
have exited (a backend flushes its statistics when it ends), the row updates and how many of
them were heap-only (`pg_stat_user_tables.n_tup_upd`, `n_tup_hot_upd`, every `hookinbox_`
table), the rows inserted and deleted. Reported per side: events/s, WAL per processed event,
heap-only share of the updates, and the ratios of N rows to the empty inbox.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
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

from bench._common import ROOT, database, machine, save
from bench.growth import (
    APP,
    HISTORY,
    add_due,
    add_rows,
    drain,
    label,
    log,
    open_engine,
    park_daily_pruner,
    parse_size,
    settle,
)

DEFAULT_BASELINE = "1b707b0"
TABLES = ("hookinbox_events", "hookinbox_event_queue", "hookinbox_outbox", "hookinbox_deliveries")


@contextmanager
def checkout(ref: str) -> Iterator[Path]:
    """`ref` checked out beside this tree (a detached worktree), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    tree = folder / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), ref], cwd=ROOT,
                   check=True, capture_output=True)  # fmt: skip
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT,
                       check=False, capture_output=True)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def hookinbox(*args: str) -> list[str]:
    """The command line of whichever tree `environment` puts first on the path."""
    return [sys.executable, "-c", "from hookinbox.cli import main; main()", *args]


def environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree / "src")}


def migrate(tree: Path, url: str) -> float:
    started = time.monotonic()
    subprocess.run(hookinbox("migrate", APP, "--database-url", url), cwd=tree,
                   env=environment(tree), check=True, capture_output=True)  # fmt: skip
    return time.monotonic() - started


@contextmanager
def workers(tree: Path, url: str, processes: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    started = [
        subprocess.Popen(
            hookinbox("worker", APP, "--database-url", url, "--log-level", "warning"),
            cwd=tree,
            env=environment(tree),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(processes)
    ]
    try:
        yield started
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def counters(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """Cumulative row counters of hookinbox's tables, fresh (not this session's snapshot)."""
    query = sa.text(
        "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
        " FROM pg_stat_user_tables WHERE relname LIKE 'hookinbox_%'"
    )
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        rows = connection.execute(query).all()
        connection.rollback()
    return {
        name: {"inserted": ins, "updated": upd, "hot": hot, "deleted": dele}
        for name, ins, upd, hot, dele in rows
    }


def backends_gone(engine: sa.Engine, timeout: float = 15.0) -> None:
    """Wait until no other session of this database is left: the workers' backends have
    exited, and so flushed their row counters (a fixed pause was too short on a loaded
    machine: a whole drain then read as no update at all)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        " AND backend_type = 'client backend'"
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with engine.connect() as connection:
            left = connection.exec_driver_sql(query).scalar_one()
            connection.rollback()
        if not left:
            return
        time.sleep(0.1)
    log(f"    {left} sessions of the drain's database still open after {timeout:.0f} s")


def heap_per_event(engine: sa.Engine, since: datetime) -> float:
    """Bytes of the events' heap per event of the batch received since `since`: the pages
    its rows were written to, over its rows. The fill factor's cost in space (a page reused
    from an earlier drain may hold older rows too: an upper bound)."""
    query = sa.text(
        "SELECT count(DISTINCT (ctid::text::point)[0]), count(*) FROM hookinbox_events"
        " WHERE received_at >= :since"
    )
    with engine.connect() as connection:
        pages, rows = connection.execute(query, {"since": since}).one()
        connection.rollback()
    return pages * 8192 / max(1, rows)


def other_sessions(engine: sa.Engine) -> int:
    """Sessions of other databases on this server: the write-ahead log is the server's, so
    theirs would be counted as the drain's (run on a cluster of its own, bench/README.md)."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname <> current_database()"
    with engine.connect() as connection:
        count = connection.exec_driver_sql(query).scalar_one()
        connection.rollback()
    return int(count)


def wal_counters(engine: sa.Engine) -> dict[str, int]:
    """The server's cumulative WAL records, full-page images and checkpoints (PostgreSQL 14+):
    a page's first change after a checkpoint logs the whole page."""
    query = (
        "SELECT w.wal_records, w.wal_fpi, b.checkpoints_timed + b.checkpoints_req"
        " FROM pg_stat_wal w, pg_stat_bgwriter b"
    )
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        records, fpi, checkpoints = connection.exec_driver_sql(query).one()
        connection.rollback()
    return {"wal_records": int(records), "wal_fpi": int(fpi), "checkpoints": int(checkpoints)}


def wal_lsn(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        lsn = connection.exec_driver_sql(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
        ).scalar_one()
        connection.rollback()
    return int(lsn)


def autovacuum_off(engine: sa.Engine) -> None:
    with engine.begin() as connection:
        for table in TABLES:
            exists = connection.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar()
            if exists:
                connection.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def set_fill_factors(engine: sa.Engine, events: int, queue: int) -> None:
    with engine.begin() as connection:
        connection.exec_driver_sql(f"ALTER TABLE hookinbox_events SET (fillfactor = {events})")
        connection.exec_driver_sql(f"ALTER TABLE hookinbox_event_queue SET (fillfactor = {queue})")


def measure(tree: Path, engine: sa.Engine, url: str, args: argparse.Namespace) -> dict[str, Any]:
    """One drain of `--batch` events by `tree`'s workers, with what it cost the database."""
    with workers(tree, url, args.worker_processes) as started:
        warm = add_due(engine, 100)  # the workers start, connect and drain a first handful
        drain(engine, warm, 100, timeout=args.drain_timeout, workers_=started)
        before = counters(engine)
        since = add_due(engine, args.batch)
        heap = heap_per_event(engine, since)  # before any of it is processed
        # Each drain starts from a checkpoint: one that an earlier vacuum asked for must not
        # land in one side's drain and not in another's (the first change of every page after
        # a checkpoint logs the whole page). The drain's own full-page images are counted.
        with engine.connect() as connection:
            connection.exec_driver_sql("CHECKPOINT")
        lsn, wal = wal_lsn(engine), wal_counters(engine)  # after the batch's commit
        result = drain(engine, since, args.batch, timeout=args.drain_timeout, workers_=started)
        result["wal_bytes"] = wal_lsn(engine) - lsn
        result.update({k: v - wal[k] for k, v in wal_counters(engine).items()})
        result["other_sessions"] = other_sessions(engine)
        if result["other_sessions"]:
            log(
                f"    {result['other_sessions']} sessions of other databases: "
                "the WAL is not the drain's alone"
            )
    backends_gone(engine)  # a backend flushes its statistics as it exits
    after = counters(engine)
    tables = {
        name: {key: after[name][key] - before.get(name, {}).get(key, 0) for key in after[name]}
        for name in after
    }
    updated = sum(t["updated"] for t in tables.values())
    hot = sum(t["hot"] for t in tables.values())
    done = max(1, result["events"])
    result.update(
        tables={name: t for name, t in tables.items() if any(t.values())},
        updates=updated,
        hot_updates=hot,
        hot_share=hot / updated if updated else 0.0,
        wal_per_event=result["wal_bytes"] / done,
        heap_per_event=heap,
    )
    log(
        f"    {result['rate']:.0f} events/s, {result['wal_per_event'] / 1024:.1f} KiB WAL per "
        f"event, {result['hot_share'] * 100:.0f} % of {updated:,} updates heap-only, "
        f"{result['heap_per_event']:.0f} B of events' heap per event; "
        f"{result['wal_fpi'] / done:.2f} full-page images per event, "
        f"{result['checkpoints']} checkpoints during the drain"
    )
    return result


def run_size(rows: int, baseline: Path, args: argparse.Namespace) -> dict[str, Any]:
    with database("postgres") as url:
        migrate(baseline, url)
        engine = open_engine(url)
        try:
            park_daily_pruner(engine)
            now = datetime.now(UTC)
            log(f"{label(rows)}: generating {rows:,} rows (schema of {args.baseline_ref})")
            add_rows(engine, rows, kind="background", oldest=now - HISTORY,
                     newest=now - timedelta(minutes=1))  # fmt: skip
            settle(engine)
            autovacuum_off(engine)
            log(f"  baseline {args.baseline_ref}: {args.batch:,} events")
            sides = {"baseline": measure(baseline, engine, url, args)}
            upgrade = migrate(ROOT, url)
            log(f"  migrated to this tree's schema in {upgrade:.2f} s")
            for pair in args.fill_factors.split(","):
                events_ff, queue_ff = (int(x) for x in pair.split(":"))
                settle(engine)
                autovacuum_off(engine)
                set_fill_factors(engine, events_ff, queue_ff)
                name = f"this tree (fill {events_ff}:{queue_ff})"
                log(f"  {name}: {args.batch:,} events")
                sides[name] = measure(ROOT, engine, url, args)
        finally:
            engine.dispose()
    return {"rows": rows, "upgrade_seconds": upgrade, "sides": sides}


def render(sizes: list[dict[str, Any]]) -> str:
    empty = next((s for s in sizes if s["rows"] == 0), None)
    lines = [
        "| rows | side | events/s | vs empty | WAL/event | vs empty | heap-only updates "
        "| heap/event |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        for name, side in size["sides"].items():
            base = empty["sides"].get(name) if empty else None
            rate = f"{side['rate'] / base['rate']:.2f}x" if base and size["rows"] else "-"
            wal = (
                f"{side['wal_per_event'] / base['wal_per_event']:.2f}x"
                if base and size["rows"] and base["wal_per_event"]
                else "-"
            )
            lines.append(
                f"| {label(size['rows'])} | {name} | {side['rate']:.0f} | {rate} | "
                f"{side['wal_per_event'] / 1024:.1f} KiB | {wal} | "
                f"{side['hot_share'] * 100:.0f} % of {side['updates']:,} | "
                f"{side['heap_per_event']:.0f} B |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1m", help="rows already stored (0,1m,10m)")
    parser.add_argument("--batch", type=int, default=20_000, help="events per drain")
    parser.add_argument("--worker-processes", type=int, default=2)
    parser.add_argument("--drain-timeout", type=float, default=900.0)
    parser.add_argument("--baseline-ref", default=DEFAULT_BASELINE)
    parser.add_argument("--fill-factors", default="50:30,85:70",
                        help="events:queue fill factors to measure this tree with")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="0 and 2,000 rows, 300 events")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.batch, args.fill_factors = "0,2k", 300, "50:30"
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    results = []
    with checkout(args.baseline_ref) as baseline:
        for rows in sizes:
            results.append(run_size(rows, baseline, args))
    table = render(results)
    print(table)
    path = save("heap_only", {"machine": machine(), "args": vars(args), "sizes": results,
                              "table": table})  # fmt: skip
    print(f"\nraw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
