"""Benchmark: the plan of a per-source prune's batches on PostgreSQL.

    python bench/retention_window.py                 # 1M events over 400 days
    python bench/retention_window.py --events 10m

One fresh database (`_common.database`) gets `--events` processed events spread over 400
days with 566-byte bodies: 40 % Stripe, kept 365 days, the rest GitHub and Shopify, kept the
inbox's 90, whose events older than 91 days earlier prunes have deleted (what a daily prune
finds). After `VACUUM ANALYZE` it prints `EXPLAIN (ANALYZE, BUFFERS)` of the three statements
a batch runs (`_storage/_housekeeping.py`): the batch below the earliest cutoff, the window's
first batch, and a window batch after its cursor (200 days back), the window's without a lock
as the prune reads them. Each should be an index scan of `ix_hookinbox_events_received_at`
that reads about a batch of rows, not the window.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from bench._common import database, sa_url
from hookinbox._storage import Cutoffs, Store
from hookinbox._storage._housekeeping import _after, _window, prunable
from hookinbox._storage._schema import events

BATCH = 500


def count(text: str) -> int:
    text = text.lower()
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * scale)


def fill(store: Store, total: int) -> None:
    with store.engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO hookinbox_events (source, event_id, event_type, occurred_at,"
            " received_at, body, headers, body_sha256, status, attempts, deferrals,"
            " next_attempt_at, delivery_count, key_conflicts, last_delivery_at)"
            " SELECT CASE WHEN mod(g, 5) < 2 THEN 'stripe' WHEN mod(g, 5) < 4 THEN 'github'"
            " ELSE 'shopify' END, 'evt_' || g, 'invoice.paid', ts, ts,"
            " decode(repeat('ab', 566), 'hex'), '{}', 'x', 'processed', 1, 0, ts, 1, 0, ts"
            " FROM (SELECT g, now() - (g * interval '400 days' / %(total)s) AS ts"
            " FROM generate_series(1, %(total)s) g) s",
            {"total": total},
        )
        connection.exec_driver_sql("DELETE FROM hookinbox_event_queue")
        connection.exec_driver_sql(
            "DELETE FROM hookinbox_events"
            " WHERE source <> 'stripe' AND received_at < now() - interval '91 days'"
        )
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.exec_driver_sql("VACUUM ANALYZE hookinbox_events")


def statements(now: datetime) -> list[tuple[str, sa.Select[tuple[object, ...]]]]:
    cutoffs = Cutoffs(now - timedelta(days=90), {"stripe": now - timedelta(days=365)})
    earliest, latest = cutoffs.earliest, cutoffs.latest
    window = sa.select(events.c.id, events.c.source, events.c.received_at).where(
        *_window(events, earliest, latest), *prunable(latest)[:1]
    )
    ordered = (events.c.received_at, events.c.id)
    cursor = (now - timedelta(days=200), 2**62)
    return [
        ("below the earliest cutoff", sa.select(events.c.id).where(*prunable(earliest))
         .order_by(events.c.received_at)),
        ("the window's first batch", window.order_by(*ordered)),
        ("a window batch after its cursor", window.where(*_after(events, cursor))
         .order_by(*ordered)),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=count, default=1_000_000)
    arguments = parser.parse_args()
    with database("postgres") as url:
        store = Store(sa_url(url))
        store.migrate()
        fill(store, arguments.events)
        with store.engine.connect() as connection:
            kept = connection.exec_driver_sql("SELECT count(*) FROM hookinbox_events").scalar()
            print(f"{kept:,} events in the table")
            for n, (name, query) in enumerate(statements(datetime.now(UTC))):
                # The window's read takes no lock (a kept row's lock would be a write)
                locked = query.limit(BATCH)
                if n == 0:
                    locked = locked.with_for_update(skip_locked=True)
                sql = str(
                    locked.compile(dialect=store.engine.dialect,
                                   compile_kwargs={"literal_binds": True})
                )  # fmt: skip
                plan = connection.exec_driver_sql("EXPLAIN (ANALYZE, BUFFERS) " + sql)
                print(f"-- {name}")
                print("\n".join(str(line) for line in plan.scalars()))
        store.dispose()


if __name__ == "__main__":
    main()
