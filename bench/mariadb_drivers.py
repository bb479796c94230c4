"""MariaDB's driver for the `mysql` extra, chosen by measurement: PyMySQL (pure Python) against
mysqlclient (C, `MySQLdb`), in the same run, on the same server and database.

Both drive hookinbox's own statements through a `Store` built on an engine of that driver
(READ COMMITTED, utf8mb4): `single` stores deliveries one per transaction (the ingest path
without group commit: the upsert, the delivery-log row, the commit), `batch` stores them in
group commit's batches of 100 (one multi-row upsert and its log rows per transaction),
`process` leases 10 due events at a time and claims each in a transaction of its own (the
worker's statements, no handler). Each run alternates the drivers; the medians are printed
and saved. mysqlclient is not a dependency of hookinbox: `pip install mysqlclient` (it builds
against libmariadb-dev) before running this.

    python bench/mariadb_drivers.py [--url mysql://root@127.0.0.1:3306/test] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from hookinbox._model import NewDelivery, Status
from hookinbox._storage import Store

DRIVERS = {"pymysql": "PyMySQL 1.x (pure Python)", "mysqldb": "mysqlclient (C)"}


def delivery(number: int, run: str) -> NewDelivery:
    body = json.dumps({"id": f"evt_{run}_{number}", "data": {"object": {"n": number}}}).encode()
    return NewDelivery(
        source="stripe",
        event_id=f"evt_{run}_{number}",
        event_type="checkout.session.completed",
        occurred_at=datetime.now(UTC),
        received_at=datetime.now(UTC),
        body=body + b" " * 1200,  # about 1.5 KB, as a Stripe event
        headers={"stripe-signature": "t=1,v1=" + "0" * 64},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )


def measure(url: str, driver: str, count: int) -> dict[str, float]:
    engine = sa.create_engine(
        make_url(url).set(drivername=f"mysql+{driver}").update_query_dict({"charset": "utf8mb4"}),
        isolation_level="READ COMMITTED",
    )
    store = Store(url, engine=engine)
    store.migrate()
    run = uuid.uuid4().hex[:8]
    rates: dict[str, float] = {}
    started = time.perf_counter()
    for number in range(count):
        store.ingest.record(delivery(number, run + "s"))
    rates["single"] = count / (time.perf_counter() - started)
    batch = [delivery(number, run + "b") for number in range(count * 10)]
    started = time.perf_counter()
    for start in range(0, len(batch), 100):
        with store.transaction() as connection:
            store.ingest.record_batch(connection, batch[start : start + 100])
    rates["batch"] = len(batch) / (time.perf_counter() - started)
    now = datetime.now(UTC) + timedelta(seconds=1)
    claimed = 0
    started = time.perf_counter()
    while claimed < count:
        lease = store.events.lease(limit=10, now=now, until=now + timedelta(minutes=5))
        if not lease.fresh:
            break
        for leased in lease.fresh:
            with store.transaction() as connection:
                store.events.claim(connection, leased, Status.PROCESSED, now, "handled")
            claimed += 1
    rates["process"] = claimed / (time.perf_counter() - started)
    with store.transaction() as connection:
        for table in ("hookinbox_deliveries", "hookinbox_event_queue", "hookinbox_events"):
            connection.exec_driver_sql(f"DELETE FROM {table}")
    store.dispose()
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="mysql://root@127.0.0.1:3306/test")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=1000, help="deliveries per run (x10 batched)")
    parser.add_argument("--smoke", action="store_true", help="one short run")
    args = parser.parse_args()
    runs, count = (1, 50) if args.smoke else (args.runs, args.count)
    name = f"hookinbox_bench_{uuid.uuid4().hex[:8]}"
    admin = sa.create_engine(make_url(args.url).set(drivername="mysql+pymysql"))
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    url = make_url(args.url).set(database=name).render_as_string(hide_password=False)
    results: dict[str, list[dict[str, float]]] = {driver: [] for driver in DRIVERS}
    try:
        for number in range(runs):
            order = list(DRIVERS) if number % 2 == 0 else list(reversed(DRIVERS))
            for driver in order:
                results[driver].append(measure(url, driver, count))
    finally:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        admin.dispose()
    print(f"{'driver':<28} {'single/s':>10} {'batch/s':>10} {'process/s':>10}")
    medians = {}
    for driver, label in DRIVERS.items():
        medians[driver] = {
            kind: statistics.median(r[kind] for r in results[driver])
            for kind in ("single", "batch", "process")
        }
        figures = " ".join(f"{medians[driver][k]:>10.0f}" for k in ("single", "batch", "process"))
        print(f"{label:<28} {figures}")
    out = Path("bench/results") / f"mariadb_drivers_{int(time.time())}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"runs": results, "medians": medians}, indent=2))
    print(f"raw results: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
