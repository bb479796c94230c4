"""Benchmark: bytes kept per event, and what processing writes, on PostgreSQL (issue 50, the
narrow events row of schema 14).

    python bench/narrow_row.py                      # 100,000 events, main against this tree
    python bench/narrow_row.py --events 300000 --baseline-ref main
    python bench/narrow_row.py --baseline-ref '' --fill-factors 50,70,85   # choosing one

For each side (`--baseline-ref`, checked out beside this tree, then this tree), on a fresh
database migrated by that side's code: `--events` deliveries with Stripe-shaped bodies
(`bench/_common.py`'s, ~570 bytes) stored through that side's `Store.ingest.record_batch` (group
commit's statement, `--batch` a transaction), then drained by `--worker-processes` `hookinbox
worker` processes of that side. Autovacuum is off on hookinbox's tables from the migration on,
as on a busy day between two autovacuum runs. Reported per side, per event stored: the heap,
TOAST and index bytes of `hookinbox_events` and `hookinbox_payloads` (the latter only where it
exists) after the drain, with no vacuum; the share of the events' row updates that were
heap-only (`pg_stat_user_tables`); the write-ahead log written by the drain; the seconds the
ingest took (in one process, its start included) and the drain's events/s.

The write-ahead log is the server's: run it where no other session writes (the script says
when other databases have sessions).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import ROOT, database, save
from bench.growth import APP, drain, log, open_engine
from bench.heap_only import checkout, counters, environment, hookinbox, workers

TABLES = ("hookinbox_events", "hookinbox_payloads", "hookinbox_event_queue")

_INGEST = """
import hashlib, sys, time
from datetime import UTC, datetime
from bench._common import stripe_body
from hookinbox._model import NewDelivery
from hookinbox._storage import Store

url, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = Store(url)
now = datetime.now(UTC)
headers = {"content-type": "application/json", "stripe-signature": "t=1700000000,v1=" + "a" * 64}
for first in range(0, count, batch):
    deliveries = []
    for n in range(first, min(count, first + batch)):
        event_id = f"evt_{n:024d}"
        body = stripe_body(event_id, f"pi_{n:024d}")
        deliveries.append(NewDelivery(
            source="stripe", event_id=event_id, event_type="checkout.session.completed",
            occurred_at=now, received_at=now, body=body, headers=headers,
            body_sha256=hashlib.sha256(body).hexdigest()))
    with store.transaction() as connection:
        store.ingest.record_batch(connection, deliveries)
print(len(body))
store.dispose()
"""


def sizes(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """Heap (main fork), TOAST (with its index) and index bytes of each of `TABLES` there is."""
    query = sa.text(
        "SELECT c.relname, pg_relation_size(c.oid),"
        " COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),"
        " pg_indexes_size(c.oid)"
        " FROM pg_class c WHERE c.relname = ANY(:tables) AND c.relkind = 'r'"
    )
    with engine.connect() as connection:
        rows = connection.execute(query, {"tables": list(TABLES)}).all()
    return {name: {"heap": heap, "toast": toast, "indexes": indexes}
            for name, heap, toast, indexes in rows}  # fmt: skip


def wal(engine: sa.Engine) -> int:
    with engine.connect() as connection:
        return int(connection.exec_driver_sql("SELECT pg_current_wal_lsn() - '0/0'").scalar_one())


def autovacuum_off(engine: sa.Engine) -> None:
    with engine.begin() as connection:
        for table in TABLES:
            exists = connection.execute(sa.text("SELECT to_regclass(:t)"), {"t": table}).scalar()
            if exists:
                connection.exec_driver_sql(f"ALTER TABLE {table} SET (autovacuum_enabled = off)")


def side(tree: Path, name: str, count: int, batch: int, processes: int,
         fill_factor: int | None = None) -> dict[str, Any]:  # fmt: skip
    with database("postgres") as url:
        engine = open_engine(url)
        subprocess.run(hookinbox("migrate", APP, "--database-url", url), cwd=tree,
                       env=environment(tree), check=True, capture_output=True)  # fmt: skip
        autovacuum_off(engine)
        if fill_factor is not None:  # instead of the one the side's migration set
            with engine.begin() as connection:
                connection.exec_driver_sql(
                    f"ALTER TABLE hookinbox_events SET (fillfactor = {int(fill_factor)})"
                )
            name = f"{name}, events at {fill_factor} %"
        since = datetime.now(UTC)
        started = time.monotonic()
        stored = subprocess.run(
            [sys.executable, "-c", _INGEST, url, str(count), str(batch)],
            cwd=tree, env={**environment(tree), "PYTHONPATH": f"{tree / 'src'}:{tree}"},
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        ingest_seconds = time.monotonic() - started
        body_bytes = int(stored.stdout.strip())
        with engine.begin() as connection:
            connection.exec_driver_sql("CHECKPOINT")
        before_wal, before_updates = wal(engine), counters(engine)
        with workers(tree, url, processes) as started_workers:
            run = drain(engine, since, count, timeout=1800, workers_=started_workers)
        time.sleep(1)  # the workers' statistics are flushed as their backends end
        written, after_updates = wal(engine) - before_wal, counters(engine)
        kept = sizes(engine)
        engine.dispose()
    after, before = after_updates["hookinbox_events"], before_updates["hookinbox_events"]
    events_updates = [after[k] - before[k] for k in ("updated", "hot")]
    per_event = {t: {k: round(v / count) for k, v in parts.items()} for t, parts in kept.items()}
    total = sum(v for table in ("hookinbox_events", "hookinbox_payloads")
                for v in kept.get(table, {}).values())  # fmt: skip
    result = {
        "side": name,
        "events": count,
        "body_bytes": body_bytes,
        "bytes_per_event": per_event,
        "events_and_payloads_per_event": round(total / count),
        "events_updates": events_updates[0],
        "heap_only_share": events_updates[1] / max(1, events_updates[0]),
        "wal_per_event": round(written / count),
        "ingest_seconds": round(ingest_seconds, 1),
        "drain_rate": round(run["rate"]),
        "drain_complete": run["complete"],
    }
    log(f"{name}: {result}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--worker-processes", type=int, default=2)
    parser.add_argument("--baseline-ref", default="main", help="'' to run this tree only")
    parser.add_argument("--fill-factors", default="", help="this tree's events' (50,70,85)")
    args = parser.parse_args()
    results = []
    if args.baseline_ref:
        with checkout(args.baseline_ref) as baseline:
            results.append(side(baseline, args.baseline_ref, args.events, args.batch,
                                args.worker_processes))  # fmt: skip
    factors = [int(f) for f in args.fill_factors.split(",") if f] or [None]
    for factor in factors:
        results.append(side(ROOT, "this tree", args.events, args.batch, args.worker_processes,
                            factor))  # fmt: skip
    save("narrow_row", {"arguments": vars(args), "results": results})
    for result in results:
        print(result)


if __name__ == "__main__":
    main()
