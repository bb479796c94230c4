"""Benchmark: growth. Does hookinbox slow down as the inbox fills, and does pruning hurt ingest?

    python bench/growth.py                                  # PostgreSQL 0/1M/10M + SQLite 0/1M
    python bench/growth.py --backend postgres --sizes 0,1m  # one backend, chosen sizes
    python bench/growth.py --smoke                          # seconds; what CI runs

For each backend and size N, a fresh database gets N events already in the inbox, written with
SQL (`INSERT ... SELECT` over `generate_series` on PostgreSQL, a recursive CTE on SQLite, in
chunks of 500,000 rows), not through HTTP: Stripe-shaped bodies (~700 bytes), received evenly
over the past 100 days in time order: 98.7% processed, 1% unhandled, 0.3% failed (failed events
wait for an operator, however old), a few pending and deferred among the last day's (retry
scheduled tomorrow: never due during a run); one delivery log row per event, plus a duplicate
delivery for 3% of them. PostgreSQL then gets
`VACUUM (ANALYZE)` and a checkpoint, as autovacuum would have done over 100 days; SQLite gets
nothing (hookinbox never runs ANALYZE there). Each size is built once and every run of that
size reuses it. Then, on that database:

- query plans: the statements hookinbox itself issues (captured from the real functions, then
  rolled back) for ingest, the worker's lease and idle checks, `status --check`, `events list`
  and one pruner batch, each run under EXPLAIN ANALYZE (PostgreSQL) or EXPLAIN QUERY PLAN
  (SQLite) and timed;
- processing: `--worker-processes` `hookinbox worker` processes; per run, `--batch` pending
  events are inserted in one transaction and the clock runs from its commit to the last
  `processed_at`; rate = events / that time;
- ingest: `hookinbox serve --no-worker`, wrk at saturation for `--seconds` per run.
Both are reported as the median of `--runs` runs and as a ratio to the empty table (target: at
10 million rows, ingest >= 0.8 x the empty-table rate).

Then pruning, on the largest database of each backend: old processed rows (91-100 days ago) are
added until at least `--prune-rows` are prunable; ingest runs at a fixed moderate `--rate`
(open loop) for `--runs` windows before, for back-to-back windows while `prune()` deletes
everything older than 90 days (in a thread of this process, as `hookinbox prune --older-than
90d` would), and for `--runs` windows after. Reported: p99 during / p99 before (target <= 2 x),
how long the prune took, and how its batches' pace changed from its first to its last tenth.

The daily pruner inside `hookinbox worker` would claim its first slot as soon as a worker starts
and delete the old rows mid-measurement, so this benchmark marks it as run until 2999.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa
from sqlalchemy import event as sa_event

from bench._common import (
    ROOT,
    Load,
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    save,
    server,
    stripe_body,
    summary,
    wrk,
)
from hookinbox._model import NewDelivery, Status
from hookinbox._operations._service import Operations
from hookinbox._records import EventFilter, Leased, Release
from hookinbox._storage import Store
from hookinbox._storage._schema import jobs

APP = "bench.peers.hookinbox_app:inbox"
DEFAULT_SIZES = {"postgres": "0,1m,10m", "sqlite": "0,1m"}
CHUNK = 500_000
HISTORY = timedelta(days=100)
RETENTION = timedelta(days=90)
SCHEDULED = timedelta(days=1)
"""When the background's pending and deferred events are retried: never during a run."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    text = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if factor > 1 else text) * factor)


def label(rows: int) -> str:
    if rows >= 1_000_000 and rows % 100_000 == 0:
        return f"{rows / 1_000_000:g}M"
    if rows >= 1_000 and rows % 100 == 0:
        return f"{rows / 1_000:g}k"
    return str(rows)


def micros(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


# -- the databases ---------------------------------------------------------------------------


def sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def open_engine(url: str) -> sa.Engine:
    """Our own engine (not hookinbox's): SQLite gets BEGIN IMMEDIATE, as hookinbox does, a big
    page cache and a sha256() function for the generator."""
    if not url.startswith("sqlite"):
        return sa.create_engine(sa_url(url), poolclass=sa.NullPool)
    engine = sa.create_engine(url, poolclass=sa.NullPool, connect_args={"timeout": 30})

    @sa_event.listens_for(engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        dbapi_connection.create_function(
            "sha256", 1, lambda body: hashlib.sha256(body).hexdigest(), deterministic=True
        )
        dbapi_connection.execute("PRAGMA cache_size=-1000000")  # 1 GB: the indexes stay hot

    @sa_event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def migrate(url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "hookinbox", "migrate", APP, "--database-url", url],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip


def park_daily_pruner(engine: sa.Engine) -> None:
    """Mark the worker's daily prune as run until 2999 (it would claim today's slot at once)."""
    with engine.begin() as connection:
        connection.execute(jobs.delete().where(jobs.c.name == "prune"))
        connection.execute(
            jobs.insert().values(
                name="prune",
                last_run_at=datetime(2999, 1, 1, tzinfo=UTC),
                last_result="parked by bench/growth.py",
            )
        )


# -- generating rows with SQL ----------------------------------------------------------------

_TEMPLATE = re.sub(r'"created":\d+', '"created":@T@', stripe_body("@E@", "@P@").decode()).replace(
    '"checkout.session.completed"', '"@Y@"'
)
_HEADERS = json.dumps(
    {
        "content-type": "application/json",
        "stripe-signature": "t=@T@,v1=@S@",
        "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
    },
    sort_keys=True,
)
_DIALECT = {
    "postgresql": {
        "with": "",
        "rows": "generate_series(CAST(:first AS BIGINT), CAST(:last AS BIGINT)) AS s(n)",
        "hex": "md5(CAST(:seed AS TEXT) || CAST(n AS TEXT))",
        "all": "ALL",
        "blob": "convert_to({}, 'UTF8')",
        "sha": "encode(sha256({}), 'hex')",
        "ts": "to_timestamp(({})::float8 / 1000000)",
        "true": "true",
        "false": "false",
    },
    "sqlite": {
        "with": "WITH RECURSIVE s(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM s "
        "WHERE n < :last) ",
        "rows": "s",
        "hex": "substr(sha256(CAST(:seed || n AS BLOB)), 1, 32)",
        "all": "-1",
        "blob": "CAST({} AS BLOB)",
        "sha": "sha256({})",
        "ts": "(strftime('%Y-%m-%d %H:%M:%S', ({0}) / 1000000, 'unixepoch') "
        "|| printf('.%06d', ({0}) % 1000000))",
        "true": "1",
        "false": "0",
    },
}
# The share of each status, by n % 1000: k < 3 failed, 3 pending (retry scheduled), 4 deferred,
# 5-14 unhandled, the rest processed. Pending and deferred only among the newest 1% (the last
# day): in a healthy inbox nothing waits for long. k = -1: pending and due now (to drain).
_KIND = {
    "background": "CASE WHEN n % 1000 IN (3, 4) AND n < CAST(:recent AS BIGINT) THEN 999 "
    "ELSE n % 1000 END",
    "processed": "999",
    "due": "-1",
}


def insert_sql(dialect: str, kind: str, *, inline: bool = False) -> tuple[str, str | None, str]:
    """(events, payloads, delivery log) statements for rows n = :first..:last received at
    :start_us + n * :step_us (microseconds since the epoch). `inline`: the schema before 14,
    whose events hold their body and headers (a baseline tree's database): no payloads
    statement."""
    d = _DIALECT[dialect]

    def ts(expr: str) -> str:
        return d["ts"].format(expr)

    body = d["blob"].format(
        "replace(replace(replace(replace(:template, '@E@', event_id), '@P@', payment), "
        "'@T@', CAST(us / 1000000 - 1 AS TEXT)), '@Y@', event_type)"
    )
    headers = "replace(replace(:headers, '@T@', CAST(us / 1000000 AS TEXT)), '@S@', u || u)"
    inline_columns = "body, headers, " if inline else ""
    # Each row's id is given (the next after :after, in n's order), and its random part `u` is
    # a hash of (:seed, n): the payloads statement makes the same rows again, with the same
    # ids and bodies, and needs no join to find its events.
    row_id = "CAST(:after AS BIGINT) + 1 + n - CAST(:first AS BIGINT)"
    inline_values = f"body, {headers}," if inline else ""
    generated = f"""(
    SELECT g.*, {body} AS body FROM (
        SELECT n, u, {_KIND[kind]} AS k,
            CAST(:start_us AS BIGINT) + n * CAST(:step_us AS BIGINT) AS us,
            'evt_' || substr(u, 1, 24) AS event_id, 'pi_' || substr(u, 9, 24) AS payment,
            CASE WHEN {_KIND[kind]} BETWEEN 5 AND 14 THEN 'invoice.paid'
                 ELSE 'checkout.session.completed' END AS event_type,
            CASE WHEN {_KIND[kind]} >= 0 AND n % 33 = 0 THEN 2 ELSE 1 END AS dups
        FROM (SELECT n, {d["hex"]} AS u FROM {d["rows"]} LIMIT {d["all"]} OFFSET 0) r
    ) g LIMIT {d["all"]} OFFSET 0
) b"""
    events_sql = f"""
{d["with"]}INSERT INTO hookinbox_events (id, source, event_id, event_type, occurred_at, received_at,
    {inline_columns}body_sha256, status, outcome, attempts, next_attempt_at, last_error,
    deferred_since, deferrals, delivery_count, key_conflicts, last_delivery_at, processed_at)
SELECT {row_id}, 'stripe', event_id, event_type, {ts("us - 1000000")}, {ts("us")}, {inline_values}
    {d["sha"].format("body")},
    CASE WHEN k < 0 THEN 'pending' WHEN k < 3 THEN 'failed' WHEN k = 3 THEN 'pending'
         WHEN k = 4 THEN 'deferred' WHEN k < 15 THEN 'unhandled' ELSE 'processed' END,
    CASE WHEN k < 0 THEN NULL WHEN k < 3 THEN 'max_attempts' WHEN k < 5 THEN NULL
         WHEN k < 15 THEN 'no_handler' ELSE 'handled' END,
    CASE WHEN k < 0 OR k = 4 THEN 0 WHEN k < 3 THEN 5 ELSE 1 END,
    CASE WHEN k IN (3, 4) THEN {ts("CAST(:scheduled_us AS BIGINT)")} ELSE {ts("us")} END,
    CASE WHEN k < 0 THEN NULL WHEN k < 3 THEN 'RuntimeError: payment service unavailable'
         WHEN k = 3 THEN 'TimeoutError: upstream timed out' WHEN k = 4 THEN 'not ready'
         ELSE NULL END,
    CASE WHEN k = 4 THEN {ts("us")} ELSE NULL END,
    CASE WHEN k = 4 THEN 3 ELSE 0 END,
    dups, 0, {ts("us + (dups - 1) * 300000000")},
    CASE WHEN k < 5 THEN NULL ELSE {ts("us + 200000")} END
FROM {generated}
ORDER BY n"""
    # Each event's payload beside it (schema 14): the same rows again, joined to the events
    # just inserted by their key.
    payloads_sql = f"""
{d["with"]}INSERT INTO hookinbox_payloads (id, body, headers)
SELECT {row_id}, body, {headers}
FROM {generated}"""
    deliveries_sql = f"""
INSERT INTO hookinbox_deliveries (source, event_id, received_at, duplicate, key_conflict)
SELECT source, event_id, moment, duplicate, {d["false"]} FROM (
    SELECT source, event_id, received_at AS moment, {d["false"]} AS duplicate
    FROM hookinbox_events WHERE id > :after
    UNION ALL
    SELECT source, event_id, last_delivery_at, {d["true"]}
    FROM hookinbox_events WHERE id > :after AND delivery_count > 1
) d ORDER BY moment"""
    return events_sql, None if inline else payloads_sql, deliveries_sql


def add_rows(engine: sa.Engine, count: int, *, kind: str, oldest: datetime, newest: datetime,
             chunk: int = CHUNK, quiet: bool = False) -> float:  # fmt: skip
    """Insert `count` events (and their delivery log rows) received evenly from `oldest` to
    `newest`, `chunk` rows per transaction; returns the seconds it took."""
    dialect = engine.dialect.name
    inline = "body" in {c["name"] for c in sa.inspect(engine).get_columns("hookinbox_events")}
    events_sql, payloads_sql, deliveries_sql = insert_sql(dialect, kind, inline=inline)
    start_us = micros(oldest)
    step_us = max(1, (micros(newest) - start_us) // max(1, count))
    params = {
        "template": _TEMPLATE,
        "headers": _HEADERS,
        "start_us": start_us,
        "step_us": step_us,
        "scheduled_us": micros(datetime.now(UTC) + SCHEDULED),
        "recent": count - count // 100,
        "seed": uuid.uuid4().hex,  # the rows' random part, a hash of (seed, n)
    }
    started = time.monotonic()
    for first in range(0, count, chunk):
        last = min(count, first + chunk) - 1
        with engine.begin() as connection:
            if dialect == "postgresql":
                connection.exec_driver_sql("SET LOCAL synchronous_commit = off")
            after = connection.execute(
                sa.text("SELECT COALESCE(MAX(id), 0) FROM hookinbox_events")
            ).scalar_one()
            bounds = {"first": first, "last": last, "after": after}
            connection.execute(sa.text(events_sql), {**params, **bounds})
            if payloads_sql is not None:
                connection.execute(sa.text(payloads_sql), {**params, **bounds})
            if dialect == "postgresql":  # the ids were given: the sequence goes on after them
                connection.exec_driver_sql(
                    "SELECT setval(pg_get_serial_sequence('hookinbox_events', 'id'),"
                    " (SELECT MAX(id) FROM hookinbox_events))"
                )
            connection.execute(sa.text(deliveries_sql), {"after": after})
        if not quiet and count > chunk:
            elapsed = time.monotonic() - started
            log(f"  {last + 1:,} / {count:,} rows ({elapsed:.0f} s)")
    return time.monotonic() - started


def settle(engine: sa.Engine) -> float:
    """PostgreSQL: VACUUM (ANALYZE) and CHECKPOINT, as 100 days of autovacuum would have left the
    tables (and so that autovacuum does not start in the middle of a measurement)."""
    started = time.monotonic()
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.exec_driver_sql("SET maintenance_work_mem = '512MB'")
            for table in ("hookinbox_events", "hookinbox_deliveries", "hookinbox_outbox"):
                connection.exec_driver_sql(f"VACUUM (ANALYZE) {table}")
            connection.exec_driver_sql("CHECKPOINT")
    else:
        raw = engine.raw_connection()  # outside a transaction (the engine begins IMMEDIATE)
        try:
            raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
    return time.monotonic() - started


def table_sizes(engine: sa.Engine, url: str) -> dict[str, Any]:
    with engine.connect() as connection:
        counts = {
            table: connection.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one()
            for table in ("hookinbox_events", "hookinbox_deliveries")
        }
        if engine.dialect.name == "postgresql":
            size = connection.execute(sa.text("SELECT pg_database_size(current_database())"))
            counts["bytes"] = size.scalar_one()
    if engine.dialect.name == "sqlite":
        path = Path(url.removeprefix("sqlite:///"))
        counts["bytes"] = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return counts


def build(backend: str, url: str, rows: int) -> tuple[sa.Engine, dict[str, Any]]:
    migrate(url)
    engine = open_engine(url)
    park_daily_pruner(engine)
    now = datetime.now(UTC)
    log(f"{backend} {label(rows)}: generating {rows:,} rows")
    seconds = add_rows(
        engine, rows, kind="background", oldest=now - HISTORY, newest=now - timedelta(minutes=1)
    )
    settle_seconds = settle(engine)
    sizes = table_sizes(engine, url)
    log(
        f"{backend} {label(rows)}: built in {seconds:.0f} s + {settle_seconds:.0f} s vacuum/"
        f"checkpoint; {sizes['bytes'] / 2**30:.2f} GiB"
    )
    return engine, {"insert_seconds": seconds, "settle_seconds": settle_seconds, **sizes}


def add_due(engine: sa.Engine, count: int) -> datetime:
    """`count` pending events due now, committed in one transaction; returns their received_at
    lower bound (every row the workers must drain has received_at >= it)."""
    since = datetime.now(UTC)
    add_rows(engine, count, kind="due", oldest=since, newest=since, chunk=max(count, 1),
             quiet=True)  # fmt: skip
    return since


# -- query plans -----------------------------------------------------------------------------


class _RolledBack(Exception):
    """Raised at commit so that the captured call changes nothing."""


def capture(store: Store, call: Callable[[], object], *, write: bool) -> list[tuple[str, Any]]:
    """The statements on hookinbox's tables that `call` executes (a write is rolled back)."""
    seen: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "hookinbox_" in statement:
            seen.append((statement, parameters))

    def abort(_conn: Any) -> None:
        raise _RolledBack

    sa_event.listen(store.engine, "before_cursor_execute", record)
    if write:
        sa_event.listen(store.engine, "commit", abort)
    try:
        call()
    except _RolledBack:
        pass
    finally:
        sa_event.remove(store.engine, "before_cursor_execute", record)
        if write:
            sa_event.remove(store.engine, "commit", abort)
    return seen


def describe(statement: str) -> str:
    verb = statement.split(None, 1)[0].upper()
    table = re.search(r"(?:FROM|UPDATE|INTO)\s+(hookinbox_\w+)", statement, re.I)
    return f"{verb} {table[1] if table else '?'}"


def _pg_nodes(node: dict[str, Any]) -> Iterator[str]:
    kind = node["Node Type"]
    if "Index Name" in node:
        yield f"{kind} {node['Index Name']}"
    elif "Relation Name" in node:
        yield f"{kind} {node['Relation Name']}"
    elif kind not in ("Result", "ModifyTable", "Aggregate", "Limit", "LockRows"):
        yield kind
    for child in node.get("Plans", []):
        yield from _pg_nodes(child)


def explain(engine: sa.Engine, url: str, statement: str, parameters: Any) -> dict[str, Any]:
    """Plan (access paths) and median time of 3 executions, each rolled back."""
    times: list[float] = []
    plan: list[str] = []
    if engine.dialect.name == "postgresql":
        raw = engine.raw_connection()
        try:
            for _ in range(3):
                cursor = raw.cursor()
                cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, parameters)
                document = cursor.fetchone()[0][0]
                raw.rollback()
                times.append(document["Execution Time"])
                plan = list(_pg_nodes(document["Plan"]))
                buffers = document["Plan"].get("Shared Hit Blocks", 0) + document["Plan"].get(
                    "Shared Read Blocks", 0
                )
        finally:
            raw.close()
        return {"ms": statistics.median(times), "plan": plan, "buffers": buffers}
    connection = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        plan = [row[3] for row in connection.execute("EXPLAIN QUERY PLAN " + statement, parameters)]
        for _ in range(3):
            connection.execute("BEGIN")
            started = time.perf_counter()
            connection.execute(statement, parameters).fetchall()
            times.append((time.perf_counter() - started) * 1000)
            connection.execute("ROLLBACK")
    finally:
        connection.close()
    return {"ms": statistics.median(times), "plan": plan}


def query_plans(engine: sa.Engine, url: str) -> list[dict[str, Any]]:
    """What hookinbox's hot and operator queries cost at this size (with due events waiting)."""
    store = Store(url)
    store.ensure_schema()
    now = datetime.now(UTC)
    body = stripe_body(f"evt_plan{uuid.uuid4().hex[:12]}", "pi_plan")
    delivery = NewDelivery(
        source="stripe", event_id=json.loads(body)["id"], event_type="checkout.session.completed",
        occurred_at=now, received_at=now, body=body, headers={"stripe-signature": "t=1,v1=0"},
        body_sha256=hashlib.sha256(body).hexdigest(),
    )  # fmt: skip

    def check() -> None:
        with store.reading() as connection:
            store.stats.report(connection, now, full=False)

    calls: list[tuple[str, Callable[[], object], bool]] = [
        ("ingest", lambda: store.ingest.record(delivery), True),
        ("worker lease", lambda: store.events.lease(limit=4, now=now,
                                                    until=now + timedelta(seconds=60)), True),
        ("worker has_due", lambda: store.events.has_due(now), False),
        ("worker next_due", lambda: store.events.next_due_at(), False),
        ("status --check", check, False),
        ("events list", lambda: store.operator.list_events(EventFilter(), 50), False),
        ("events list --status failed",
         lambda: store.operator.list_events(EventFilter(status=Status.FAILED), 50), False),
        ("prune batch", lambda: store.housekeeping.prune_batch(now - RETENTION, 500), True),
        ("worker claim", lambda: finish(leased[0]), True),
    ]  # fmt: skip
    leased: list[Leased] = []

    def finish(event: Leased) -> None:
        """The processing transaction's own statement (the handler's insert left out; the
        outcome is written by the claim unless a business key changes it)."""
        with store.transaction() as connection:
            store.events.claim(connection, event, Status.PROCESSED, now, "handled")

    found: list[dict[str, Any]] = []
    try:
        for name, call, write in calls:
            if name.startswith("worker claim"):  # needs an event leased for real; given back
                until = now + timedelta(minutes=1)
                leased = store.events.lease(limit=1, now=now, until=until).fresh
                if not leased:
                    continue
            for index, (statement, parameters) in enumerate(capture(store, call, write=write)):
                result = explain(engine, url, statement, parameters)
                found.append({"call": name, "index": index, "statement": describe(statement),
                              "sql": statement, **result})  # fmt: skip
    finally:
        if leased:
            store.events.release(leased[0], Release(Status.PENDING, now, None, refund_attempt=True))
        store.dispose()
    return found


# -- processing ------------------------------------------------------------------------------


@contextmanager
def workers(url: str, processes: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    logs = [
        Path(tempfile.mkstemp(prefix="bench-worker-", suffix=".log")[1]) for _ in range(processes)
    ]
    started = []
    for path in logs:
        with path.open("wb") as out:
            started.append(subprocess.Popen(
                [sys.executable, "-m", "hookinbox", "worker", APP, "--database-url", url,
                 "--log-level", "warning"],
                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
            ))  # fmt: skip
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
        for path in logs:
            text = path.read_text(errors="replace").strip()
            if text:
                log(f"worker log {path}: {text[-1500:]}")
            path.unlink()


POLL = 0.25
"""Seconds between two looks at whether a processing run is done."""


def drain(engine: sa.Engine, since: datetime, count: int, *, timeout: float,
          workers_: Sequence[subprocess.Popen[bytes]]) -> dict[str, Any]:  # fmt: skip
    """Wait until every event received since `since` is done; the rate runs from `since` (just
    before the commit that made them visible) to the last `processed_at`. After `timeout`
    seconds: the rate so far, marked incomplete.

    The wait itself must cost the database little, or it measures itself: a `COUNT(*)` of the
    open events every 50 ms read every index entry the run had left behind (two per processed
    event, each a heap fetch) and took 8 ms of PostgreSQL's CPU per look at 10 million rows,
    3 ms on the empty table: a sixth of a core at 10M against a twentieth, taken from the
    workers (2026-12-03). The poll now asks whether any open event is left (`EXISTS` stops
    at the first), every `POLL` seconds; the rate does not depend on the poll's timing."""
    waiting = sa.text(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM hookinbox_events WHERE status IN "
        "('pending', 'processing') AND received_at >= :since) THEN 1 ELSE 0 END"
    )
    outcome = sa.text(
        "SELECT status, COUNT(*), MAX(processed_at) FROM hookinbox_events "
        "WHERE received_at >= :since GROUP BY status"
    )
    deadline = time.monotonic() + timeout
    with engine.connect() as connection:
        while True:
            left = connection.execute(waiting, {"since": _bind(engine, since)}).scalar_one()
            connection.rollback()
            if left == 0 or time.monotonic() > deadline:
                break
            if any(w.poll() is not None for w in workers_):
                raise RuntimeError("a worker exited during the run")
            time.sleep(POLL)
        rows = connection.execute(outcome, {"since": _bind(engine, since)}).all()
        connection.rollback()
    statuses = {status: n for status, n, _ in rows}
    if left:
        left = statuses.get("pending", 0) + statuses.get("processing", 0)
        seconds = (datetime.now(UTC) - since).total_seconds()
        log(f"  processing: {left} of {count} events still waiting after {timeout:.0f} s")
        return {"events": count - left, "seconds": seconds, "rate": (count - left) / seconds,
                "statuses": statuses, "complete": False}  # fmt: skip
    last = max(_as_datetime(at) for _, _, at in rows if at is not None)
    seconds = (last - since).total_seconds()
    return {"events": count, "seconds": seconds, "rate": count / seconds, "statuses": statuses,
            "complete": True}  # fmt: skip


def autovacuum(engine: sa.Engine) -> str | None:
    """PostgreSQL's `autovacuum` setting (None on SQLite). With it off (as on some test
    machines) nothing vacuums between runs: every processed event leaves dead entries at the
    head of the due index that later leases step over, so the figures are of an inbox that
    never gets vacuumed."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as connection:
        return str(connection.exec_driver_sql("SHOW autovacuum").scalar_one())


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of these processes so far."""
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _bind(engine: sa.Engine, moment: datetime) -> Any:
    """A timestamp as the column stores it (SQLite: naive UTC text with microseconds)."""
    if engine.dialect.name == "sqlite":
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return moment


def _as_datetime(value: Any) -> datetime:
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def processing(engine: sa.Engine, url: str, args: argparse.Namespace,
               warmup_since: datetime | None) -> dict[str, Any]:  # fmt: skip
    runs = []
    with workers(url, args.worker_processes) as started:
        # The plans' due events are the warm-up: drained, the workers are up and listening.
        since = warmup_since or add_due(engine, 100)
        warmup = drain(engine, since, 100, timeout=args.drain_timeout, workers_=started)
        for _ in range(args.runs if warmup["complete"] else 0):
            time.sleep(0.5)
            since = add_due(engine, args.batch)
            runs.append(drain(engine, since, args.batch, timeout=args.drain_timeout,
                              workers_=started))  # fmt: skip
            log(f"  processing: {runs[-1]['rate']:.0f} events/s")
            if not runs[-1]["complete"]:
                break  # too slow to be worth more runs; the rest stays pending
        # What the workers cost while nothing is due (their polling, their idle queries).
        time.sleep(1)
        pids = [w.pid for w in started]
        before = cpu_seconds(pids)
        time.sleep(args.idle_seconds)
        idle_cpu = (cpu_seconds(pids) - before) / args.idle_seconds
    log(f"  idle workers: {idle_cpu * 100:.1f}% of a core")
    return {"runs": runs or [warmup], "idle_cpu": idle_cpu}


# -- ingest ----------------------------------------------------------------------------------


def ingest(url: str, args: argparse.Namespace) -> list[Load]:
    runs: list[Load] = []
    command = hookinbox_serve(APP, url, args.http_workers)
    with server(command, env={"BENCH_DATABASE_URL": url}) as running:
        target = f"{running.base_url}/webhooks/stripe"
        warmup = request_file(200)
        fixed_rate(target, warmup, rate=100, seconds=1)
        warmup.unlink()
        for _ in range(args.runs):
            if args.smoke:
                requests = request_file(200)
                runs.append(fixed_rate(target, requests, rate=100, seconds=1))
            else:
                requests = request_file(max(20_000, 8_000 * args.seconds))
                runs.append(wrk(target, requests, seconds=args.seconds))
            requests.unlink()
            log(f"  ingest: {runs[-1].rate:.0f} req/s, p99 {runs[-1].p99_ms:.1f} ms")
    return runs


# -- pruning while ingest runs ---------------------------------------------------------------


def count_prunable(engine: sa.Engine, cutoff: datetime) -> int:
    query = sa.text(
        "SELECT COUNT(*) FROM hookinbox_events WHERE received_at < :cutoff "
        "AND status IN ('processed', 'unhandled')"
    )
    with engine.connect() as connection:
        return int(connection.execute(query, {"cutoff": _bind(engine, cutoff)}).scalar_one())


class Pruner(threading.Thread):
    """hookinbox's `prune()` (what `hookinbox prune` runs), timing each batch."""

    def __init__(self, url: str, now: datetime) -> None:
        super().__init__(name="bench-prune", daemon=True)
        self.store = Store(url)
        self.now = now
        self.batches: list[tuple[float, int]] = []
        self.result: Any = None
        self.error: BaseException | None = None
        self.started_at = self.ended_at = 0.0

    def run(self) -> None:
        self.started_at = time.monotonic()
        try:
            self.result = Operations(self.store).prune(
                now=self.now, retention=RETENTION,
                progress=lambda n: self.batches.append((time.monotonic(), n)),
            )  # fmt: skip
        except BaseException as error:  # reported by the caller
            self.error = error
        finally:
            self.ended_at = time.monotonic()
            self.store.dispose()

    def pace(self) -> dict[str, float]:
        """Events deleted per second over the first and the last tenth of the batches."""
        times = [self.started_at] + [t for t, _ in self.batches]
        sizes = [n for _, n in self.batches]
        tenth = max(1, len(sizes) // 10)

        def rate(lo: int, hi: int) -> float:
            return sum(sizes[lo:hi]) / max(1e-9, times[hi] - times[lo])

        return {"first_tenth": rate(0, tenth), "last_tenth": rate(len(sizes) - tenth, len(sizes))}


def prune_case(engine: sa.Engine, url: str, args: argparse.Namespace) -> dict[str, Any]:
    now = datetime.now(UTC)
    cutoff = now - RETENTION
    prunable = count_prunable(engine, cutoff)
    top_up = max(0, args.prune_rows - prunable)
    if top_up:
        log(f"prune: adding {top_up:,} old processed rows ({prunable:,} already prunable)")
        add_rows(engine, top_up, kind="processed", oldest=now - HISTORY,
                 newest=cutoff - timedelta(days=1))  # fmt: skip
        settle(engine)
    sizes = table_sizes(engine, url)
    prunable = count_prunable(engine, cutoff)
    before: list[Load] = []
    during: list[tuple[Load, bool]] = []
    after: list[Load] = []
    command = hookinbox_serve(APP, url, args.http_workers)
    with server(command, env={"BENCH_DATABASE_URL": url}) as running:
        target = f"{running.base_url}/webhooks/stripe"

        def window() -> Load:
            requests = request_file(int(args.rate * args.seconds) + 10)
            try:
                return fixed_rate(target, requests, rate=args.rate, seconds=args.seconds)
            finally:
                requests.unlink()

        warmup = request_file(200)
        fixed_rate(target, warmup, rate=100, seconds=1)
        warmup.unlink()
        for _ in range(args.runs):
            before.append(window())
        log(f"prune: p99 before {[round(w.p99_ms, 1) for w in before]} ms; pruning {prunable:,}")
        pruner = Pruner(url, now)
        pruner.start()
        while pruner.is_alive():
            load = window()
            during.append((load, pruner.is_alive()))  # True: the prune ran the whole window
            log(f"  during: p99 {load.p99_ms:.1f} ms ({len(pruner.batches)} batches so far)")
        pruner.join()
        if pruner.error is not None:
            raise RuntimeError("prune failed") from pruner.error
        for _ in range(args.runs):
            after.append(window())
    sizes_after = table_sizes(engine, url)  # SQLite returns freed pages; PostgreSQL reuses them
    seconds = pruner.ended_at - pruner.started_at
    full = [load for load, whole in during if whole] or [load for load, _ in during]
    p99_before = statistics.median(w.p99_ms for w in before)
    p99_during = statistics.median(w.p99_ms for w in full)
    log(f"prune: {pruner.result.summary()} in {seconds:.1f} s; p99 x{p99_during / p99_before:.2f}")
    return {
        "rows_before": sizes,
        "rows_after": sizes_after,
        "prunable": prunable,
        "topped_up": top_up,
        "prune_seconds": seconds,
        "deleted": {"events": pruner.result.events, "deliveries": pruner.result.deliveries},
        "batches": len(pruner.batches),
        "pace_events_per_s": pruner.pace() if pruner.batches else {},
        "rate": args.rate,
        "before": before,
        "during": [{"load": load, "whole_window": whole} for load, whole in during],
        "after": after,
        "p99_before_ms": summary([w.p99_ms for w in before]),
        "p99_during_ms": summary([w.p99_ms for w in full]),
        "p99_after_ms": summary([w.p99_ms for w in after]),
        "ratio": p99_during / p99_before,
        "errors": sum(w.errors for w in [*before, *full, *after]),
        "windows_fully_during": sum(1 for _, whole in during if whole),
    }


# -- one backend -----------------------------------------------------------------------------


def run_backend(backend: str, sizes: list[int], args: argparse.Namespace) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    pruning: dict[str, Any] | None = None
    for rows in sizes:
        with database(backend) as url:
            started = time.monotonic()
            load_average = os.getloadavg()  # other work on the machine skews every figure
            engine, built = build(backend, url, rows)
            try:
                since = add_due(engine, 100)  # due events for the lease's plan; the warm-up
                plans = query_plans(engine, url)
                log(f"{backend} {label(rows)}: processing")
                work = processing(engine, url, args, since)
                log(f"{backend} {label(rows)}: ingest")
                loads = ingest(url, args)
                if rows == max(sizes) and args.prune_rows > 0:
                    pruning = {"rows": rows, **prune_case(engine, url, args)}
            finally:
                engine.dispose()
            results.append({
                "rows": rows,
                "autovacuum": autovacuum(engine),
                "build": built,
                "plans": plans,
                "processing": work["runs"],
                "processing_rate": summary([r["rate"] for r in work["runs"]]),
                "processing_complete": all(r["complete"] for r in work["runs"]),
                "idle_worker_cpu": work["idle_cpu"],
                "ingest": loads,
                "ingest_rate": summary([r.rate for r in loads]),
                "ingest_p99_ms": summary([r.p99_ms for r in loads]),
                "ingest_errors": sum(r.errors for r in loads),
                "seconds": time.monotonic() - started,
                "load_average_at_start": load_average,
            })  # fmt: skip
            log(f"{backend} {label(rows)}: done in {results[-1]['seconds']:.0f} s")
    return {"backend": backend, "sizes": results, "prune": pruning}


# -- report ----------------------------------------------------------------------------------


def render(backends: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Growth: ingest (wrk, {args.http_workers} HTTP process{'es' * (args.http_workers > 1)}, "
        f"`serve --no-worker`) and processing ({args.worker_processes} `hookinbox worker` "
        f"processes, {args.batch:,} events per run), median of {args.runs} (min-max). "
        "Target at 10M rows: ingest >= 0.8x empty.",
        "",
        "| backend | rows in inbox | build | ingest req/s | vs empty | ingest p99 ms | "
        "processing events/s | vs empty | idle workers' CPU |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for b in backends:
        base = b["sizes"][0]
        for s in b["sizes"]:
            ingest_, work = s["ingest_rate"], s["processing_rate"]
            build_s = s["build"]["insert_seconds"] + s["build"]["settle_seconds"]
            lines.append(
                f"| {b['backend']} | {label(s['rows'])} | {build_s:.0f} s | "
                f"{ingest_['median']:.0f} ({ingest_['min']:.0f}-{ingest_['max']:.0f}) | "
                f"{ingest_['median'] / base['ingest_rate']['median']:.2f}x | "
                f"{s['ingest_p99_ms']['median']:.1f} | "
                f"{work['median']:.0f} ({work['min']:.0f}-{work['max']:.0f}) | "
                f"{work['median'] / base['processing_rate']['median']:.2f}x"
                f"{'' if s['processing_complete'] else ' (cut short)'} | "
                f"{s['idle_worker_cpu'] * 100:.0f}% of a core |"
            )
    if any(s.get("autovacuum") == "off" for b in backends for s in b["sizes"]):
        lines += ["", "PostgreSQL ran with `autovacuum = off`: nothing vacuumed the tables "
                  "during the runs."]  # fmt: skip
    prunes = [b for b in backends if b["prune"]]
    if prunes:
        lines += [
            "",
            f"Pruning while ingest runs at {args.rate:.0f} events/s (open loop, {args.seconds} s "
            "windows). Target: p99 during <= 2x before.",
            "",
            "| backend | rows in inbox | pruned events (+ log rows) | prune took | "
            "pace first/last tenth (events/s) | p99 ms before | p99 ms during (max) | ratio | "
            "p99 ms after | database GiB before / after |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for b in prunes:
            p = b["prune"]
            pace = p["pace_events_per_s"]
            lines.append(
                f"| {b['backend']} | {label(p['rows_before']['hookinbox_events'])} | "
                f"{p['deleted']['events']:,} (+{p['deleted']['deliveries']:,}) | "
                f"{p['prune_seconds']:.0f} s | "
                f"{pace.get('first_tenth', 0):.0f} / {pace.get('last_tenth', 0):.0f} | "
                f"{p['p99_before_ms']['median']:.1f} | {p['p99_during_ms']['median']:.1f} "
                f"({p['p99_during_ms']['max']:.1f}) | {p['ratio']:.2f}x | "
                f"{p['p99_after_ms']['median']:.1f} | "
                f"{p['rows_before']['bytes'] / 2**30:.2f} / "
                f"{p.get('rows_after', p['rows_before'])['bytes'] / 2**30:.2f} |"
            )
    for b in backends:
        sizes = b["sizes"]
        lines += [
            "",
            f"Query plans on {b['backend']} (ms, median of 3, rolled back; the plan at "
            f"{label(sizes[-1]['rows'])} rows):",
            "",
            "| call | statement | " + " | ".join(label(s["rows"]) for s in sizes) + " | plan |",
            "|---|---|" + "---|" * len(sizes) + "---|",
        ]
        for plan in sizes[-1]["plans"]:
            times = []
            for s in sizes:
                same = [p for p in s["plans"] if (p["call"], p["index"]) ==
                        (plan["call"], plan["index"])]  # fmt: skip
                times.append(f"{same[0]['ms']:.2f}" if same else "-")
            buffers = f" [{plan['buffers']} buffers]" if "buffers" in plan else ""
            lines.append(f"| {plan['call']} | {plan['statement']} | {' | '.join(times)} | "
                         f"{'; '.join(plan['plan'])}{buffers} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="postgres,sqlite", help="postgres, sqlite or both")
    parser.add_argument("--sizes", help="rows already in the inbox, e.g. 0,1m,10m "
                        f"(default: {DEFAULT_SIZES})")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10, help="per ingest run / prune window")
    parser.add_argument("--batch", type=int, default=5_000, help="events drained per run")
    parser.add_argument("--worker-processes", type=int, default=2)
    parser.add_argument("--drain-timeout", type=float, default=180,
                        help="seconds before a processing run is cut short")  # fmt: skip
    parser.add_argument("--idle-seconds", type=float, default=5,
                        help="how long idle workers' CPU is sampled")  # fmt: skip
    parser.add_argument("--http-workers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=200, help="events/s around the prune")
    parser.add_argument("--prune-rows", type=parse_size, default=1_000_000,
                        help="prunable rows at least (0: skip the prune case)")  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no wrk")
    args = parser.parse_args()
    if args.smoke:
        args.sizes = args.sizes or "0,2k"
        args.runs, args.seconds, args.batch, args.rate, args.prune_rows = 1, 1, 50, 50, 1_000
        args.idle_seconds = 1
    started = time.monotonic()
    backends = []
    for backend in args.backend.split(","):
        sizes = [parse_size(s) for s in (args.sizes or DEFAULT_SIZES[backend]).split(",")]
        backends.append(run_backend(backend, sizes, args))
    table = render(backends, args)
    path = save("growth", {"settings": vars(args), "results": backends,
                           "seconds": time.monotonic() - started})  # fmt: skip
    print(table)
    print(f"\nraw results: {path} ({(time.monotonic() - started) / 60:.1f} min)", file=sys.stderr)


if __name__ == "__main__":
    main()
