"""MariaDB's isolation level for hookinbox's sessions, chosen by measurement: READ COMMITTED
against InnoDB's default REPEATABLE READ, with concurrent upserts of new and duplicate events.

Several processes store the same events at once, each every event 3 times in a shuffled order,
in group commit's batches (one multi-row upsert in key order and its log rows per
transaction): the load of several `serve` processes receiving a provider's retries. Under
REPEATABLE READ an insert takes gap (next-key) locks on the unique index, and two batches
inserting into the same gap can deadlock although they lock their keys in the same order;
READ COMMITTED takes no gap locks. Counted per level: batches that deadlocked (1213) or timed
out (1205), batches/s, and whether every event was stored once with every delivery counted.

    python bench/mariadb_isolation.py [--url mysql://root@127.0.0.1:3306/test] [--processes 4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import random
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox._model import NewDelivery
from hookinbox._storage import Store

LEVELS = ("READ COMMITTED", "REPEATABLE READ")


def delivery(number: int) -> NewDelivery:
    body = json.dumps({"id": f"evt_{number}"}).encode()
    return NewDelivery(
        source="stripe",
        event_id=f"evt_{number:07d}",
        event_type="invoice.paid",
        occurred_at=None,
        received_at=datetime.now(UTC),
        body=body,
        headers={},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )


def _store(url: str, level: str) -> Store:
    engine = sa.create_engine(url, isolation_level=level, pool_size=1)
    return Store(url, engine=engine)


def worker(url: str, level: str, events: int, seed: int, batch: int) -> dict[str, int]:
    store = _store(url, level)
    numbers = [n for n in range(events) for _ in range(3)]
    random.Random(seed).shuffle(numbers)
    counts = {"batches": 0, "deadlocks": 0, "timeouts": 0, "stored": 0}
    for start in range(0, len(numbers), batch):
        items = [delivery(n) for n in numbers[start : start + batch]]
        while True:
            try:
                with store.transaction() as connection:
                    store.ingest.record_batch(connection, items)
                counts["batches"] += 1
                counts["stored"] += len(items)
                break
            except Exception as error:  # retried, as the provider would
                code = getattr(getattr(error.__cause__, "orig", None), "args", (None,))[0]
                if code == 1213:
                    counts["deadlocks"] += 1
                elif code == 1205:
                    counts["timeouts"] += 1
                else:
                    raise
    store.dispose()
    return counts


def run_level(url: str, level: str, processes: int, events: int, batch: int) -> dict[str, object]:
    store = _store(url, level)
    store.migrate()
    with store.transaction() as connection:
        for table in ("hookinbox_deliveries", "hookinbox_event_queue", "hookinbox_events"):
            connection.exec_driver_sql(f"DELETE FROM {table}")
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with context.Pool(processes) as pool:
        parts = pool.starmap(
            worker, [(url, level, events, seed, batch) for seed in range(processes)]
        )
    elapsed = time.perf_counter() - started
    with store.reading() as connection:
        rows, counted = connection.exec_driver_sql(
            "SELECT COUNT(*), SUM(delivery_count) FROM hookinbox_events"
        ).one()
    store.dispose()
    total = {key: sum(p[key] for p in parts) for key in parts[0]}
    return {
        "level": level,
        **total,
        "batches_per_s": total["batches"] / elapsed,
        "rows": int(rows),
        "counted": int(counted),
        "exact": int(rows) == events and int(counted) == events * 3 * processes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--smoke", action="store_true", help="a short run")
    args = parser.parse_args()
    events = 200 if args.smoke else args.events
    name = f"hookinbox_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(args.url).set(drivername="mysql+pymysql"))
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    url = (
        make_url(args.url)
        .set(drivername="mysql+pymysql", database=name)
        .update_query_dict({"charset": "utf8mb4"})
        .render_as_string(hide_password=False)
    )
    try:
        results = [run_level(url, level, args.processes, events, args.batch) for level in LEVELS]
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
    print(f"{'level':<16} {'batches':>8} {'deadlocks':>9} {'timeouts':>8} {'batches/s':>9} exact")
    for r in results:
        print(
            f"{r['level']:<16} {r['batches']:>8} {r['deadlocks']:>9} {r['timeouts']:>8}"
            f" {r['batches_per_s']:>9.1f} {r['exact']}"
        )
    out = Path("bench/results") / f"mariadb_isolation_{int(time.time())}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"raw results: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
