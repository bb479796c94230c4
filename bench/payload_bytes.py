"""Benchmark: what a stored payload takes on each database, in each stored format (issue 50).

    python bench/payload_bytes.py                                  # 20,000 events, 3 databases
    python bench/payload_bytes.py --backends sqlite --events 5000
    python bench/payload_bytes.py --tree ../main --formats clear,encrypted   # another tree's code

For each backend (SQLite, PostgreSQL, MariaDB) and each format (in clear; compressed,
`HOOKINBOX_COMPRESSION=zlib`; encrypted, `HOOKINBOX_ENCRYPTION_KEYS` with a fresh key; both),
on a fresh database: `--events` Stripe-shaped deliveries (`bench/_common.py`'s bodies, ~620
bytes, with the three headers serve keeps for Stripe: content-type, user-agent and a
stripe-signature) stored through this tree's `Store.ingest.record_batch` (group commit's
statement, 100 a transaction), in one process. Reported per event: the stored values
(`length(body) + length(headers)`), what `hookinbox_payloads` takes on disk, and this
process's CPU to store a delivery (its encoding, the driver and the statement's Python side).

On disk: PostgreSQL's `pg_total_relation_size` (heap, TOAST, indexes); SQLite's pages of the
table and its indexes (`dbstat`); MariaDB's `DATA_LENGTH + INDEX_LENGTH` after `ANALYZE TABLE`
(InnoDB's page counts). No vacuum: the rows are written once.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import database, save, sign, stripe_body

FORMATS = {
    "clear": {},
    "zlib": {"HOOKINBOX_COMPRESSION": "zlib"},
    "encrypted": {"HOOKINBOX_ENCRYPTION_KEYS": "bench:"},
    "zlib + encrypted": {"HOOKINBOX_COMPRESSION": "zlib", "HOOKINBOX_ENCRYPTION_KEYS": "bench:"},
}
BATCH = 100


def deliveries(count: int) -> list[Any]:
    from hookinbox._model import NewDelivery

    now = datetime.now(UTC)
    made = []
    for n in range(count):
        event_id = f"evt_{os.urandom(6).hex()}{n:09d}"
        body = stripe_body(event_id, f"pi_{n:024d}")
        headers = {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": sign(body),
            "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        }
        made.append(NewDelivery(
            source="stripe", event_id=event_id, event_type="checkout.session.completed",
            occurred_at=now, received_at=now, body=body, headers=headers,
            body_sha256=hashlib.sha256(body).hexdigest()))  # fmt: skip
    return made


def on_disk(engine: sa.Engine, backend: str) -> int:
    with engine.connect() as connection:
        if backend == "postgres":
            query = "SELECT pg_total_relation_size('hookinbox_payloads')"
        elif backend == "sqlite":
            query = (
                "SELECT SUM(pgsize) FROM dbstat WHERE name = 'hookinbox_payloads' OR name IN"
                " (SELECT name FROM sqlite_master WHERE tbl_name = 'hookinbox_payloads')"
            )
        else:
            connection.exec_driver_sql("ANALYZE TABLE hookinbox_payloads").all()
            query = (
                "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'hookinbox_payloads'"
            )
        return int(connection.exec_driver_sql(query).scalar_one())


def measure(backend: str, settings: dict[str, str], count: int) -> dict[str, float]:
    from hookinbox._storage import Store

    key = "bench:" + base64.b64encode(os.urandom(32)).decode()
    for name in ("HOOKINBOX_COMPRESSION", "HOOKINBOX_ENCRYPTION_KEYS"):
        os.environ[name] = key if name in settings and settings[name] == "bench:" else ""
        if name == "HOOKINBOX_COMPRESSION":
            os.environ[name] = settings.get(name, "off")
    items = deliveries(count)
    with database(backend) as url:
        store = Store(url)
        try:
            started = time.process_time()
            for first in range(0, count, BATCH):
                with store.transaction() as connection:
                    store.ingest.record_batch(connection, items[first : first + BATCH])
            cpu = time.process_time() - started
            with store.engine.connect() as connection:
                stored = connection.exec_driver_sql(
                    "SELECT SUM(LENGTH(body) + LENGTH(headers)) FROM hookinbox_payloads"
                ).scalar_one()
            disk = on_disk(store.engine, backend)
        finally:
            store.dispose()
    body = sum(len(i.body) for i in items) / count
    return {"body": body, "stored": int(stored) / count, "disk": disk / count,
            "cpu_us": cpu / count * 1e6}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="sqlite,postgres,mysql")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--formats", default=",".join(FORMATS), help="of: " + ", ".join(FORMATS))
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]),
                        help="the tree whose src/hookinbox stores (a tree without compression "
                        "stores its 'zlib' rows in clear)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="200 events, SQLite (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.events, args.backends = 200, "sqlite"
    sys.path.insert(1, str(Path(args.tree).resolve() / "src"))
    results: dict[str, dict[str, dict[str, float]]] = {}
    for backend in args.backends.split(","):
        for name in args.formats.split(","):
            settings = FORMATS[name]
            measured = measure(backend, settings, args.events)
            results.setdefault(backend, {})[name] = measured
            print(f"{backend} {name}: {measured}", file=sys.stderr, flush=True)
    lines = [
        "| database | format | stored values, B/event | hookinbox_payloads on disk, B/event "
        "| vs clear | CPU to store, us/event |",
        "|---|---|---|---|---|---|",
    ]
    for backend, formats in results.items():
        clear = formats.get("clear", next(iter(formats.values())))["disk"]
        for name, m in formats.items():
            lines.append(
                f"| {backend} | {name} | {m['stored']:,.0f} | {m['disk']:,.0f} | "
                f"{m['disk'] / clear:.2f}x | {m['cpu_us']:.0f} |"
            )
    text = "\n".join(lines)
    path = save("payload_bytes", {"args": vars(args), "results": results, "table": text})
    print(text)
    print(f"raw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
