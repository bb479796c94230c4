"""Benchmark: space. What the example shop keeps per event, and how many updates stay heap-only.

    python bench/space.py                          # 20,000 events, vs b92f5b4 (~8 min)
    python bench/space.py --baseline-ref 81ff7a0   # against another git ref
    python bench/space.py --smoke                  # seconds; what CI runs
    python bench/space.py --compression both       # this tree with and without compression

PostgreSQL only (heap-only updates are PostgreSQL's). For each side, in one run, on a fresh
database of its own: the baseline (`--baseline-ref`, checked out with `git worktree add`) and
then this tree, each as commands started from its own tree:

1. `hookinbox migrate` of the example shop (`hookinbox.examples.shop:inbox`), then autovacuum
   off on every table of the database: nothing vacuums during the run, as on a busy hour
   between two autovacuum runs (no vacuum: the space measured is what the run's writes left);
2. **ingest**: `hookinbox serve --no-worker`, and `--events` distinct signed Stripe
   `checkout.session.completed` deliveries (bench/_common.py's, signed as Stripe signs) sent
   at `--rate` per second, open loop, from a separate process (`_loadgen.py`);
3. **processing**: one `hookinbox worker --no-relay` until every event is processed (each
   creates an order and sends a receipt through the outbox): events/s from the first to the
   last `processed_at`;
4. **relay**: one `hookinbox relay` until every receipt is delivered (the shop's destination
   without `SHOP_EMAIL_URL` only logs, so the relay's own statements are what is timed):
   messages/s from the first to the last `delivered_at`.

After each step's processes have exited (a backend flushes its row counters when it ends),
per `hookinbox_` table: the rows updated and how many of them were heap-only
(`pg_stat_user_tables.n_tup_upd`, `n_tup_hot_upd`). At the end, per table, heap, indexes and
TOAST (`pg_total_relation_size`) over the events stored: bytes kept per event; the shop's own
tables are listed apart and not counted. Reported per side, and this tree / baseline.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import ROOT, SECRET, database, fixed_rate, request_file, save, server
from bench.heap_only import backends_gone, checkout
from bench.heap_only import counters as heap_only_counters

APP = "hookinbox.examples.shop:inbox"
DEFAULT_BASELINE = "b92f5b4"
"""main before schema 15 (issue 50's "this main", 2026-12-07)."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def environment(tree: Path, compression: str = "off") -> dict[str, str]:
    """The shop's secrets as the bench signs, and `tree`'s hookinbox first on the path; no
    `SHOP_EMAIL_URL`, so receipts are logged (the relay's statements are what is timed);
    `HOOKINBOX_COMPRESSION` as asked (a tree that predates it ignores it)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "STRIPE_WEBHOOK_SECRET": SECRET}
    env["HOOKINBOX_COMPRESSION"] = compression
    env.pop("SHOP_EMAIL_URL", None)
    return env


def hookinbox(*args: str) -> list[str]:
    return [sys.executable, "-m", "hookinbox", *args]


def open_engine(url: str) -> sa.Engine:
    return sa.create_engine(
        url.replace("postgresql://", "postgresql+psycopg://", 1), poolclass=sa.NullPool
    )


def scalar(engine: sa.Engine, statement: str) -> Any:
    with engine.connect() as connection:
        value = connection.exec_driver_sql(statement).scalar()
        connection.rollback()
    return value


def autovacuum_off(engine: sa.Engine) -> None:
    with engine.begin() as connection:
        names = connection.exec_driver_sql(
            "SELECT relname FROM pg_class"
            " WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
        ).scalars()
        for name in list(names):
            connection.exec_driver_sql(
                f'ALTER TABLE "{name}" SET (autovacuum_enabled = false,'
                " toast.autovacuum_enabled = false)"
            )


def set_fill_factors(engine: sa.Engine, settings: list[str]) -> None:
    """`TABLE=PERCENT` settings (this tree's side only; the tables are empty: every page)."""
    with engine.begin() as connection:
        for setting in settings:
            table, _, percent = setting.partition("=")
            connection.exec_driver_sql(f'ALTER TABLE "{table}" SET (fillfactor = {int(percent)})')


@contextmanager
def running(tree: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        hookinbox(*args),
        cwd=tree,
        env=environment(tree),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(
    engine: sa.Engine, statement: str, process: subprocess.Popen[bytes], timeout: float
) -> None:
    """Until `statement` counts nothing left (polled twice a second; small tables only)."""
    deadline = time.monotonic() + timeout
    while (left := scalar(engine, statement)) != 0:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}, {left} left")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{left} left after {timeout:.0f} s: {statement}")
        time.sleep(0.5)


def counters(engine: sa.Engine) -> dict[str, tuple[int, int]]:
    """(rows updated, of which heap-only) per `hookinbox_` table, fresh."""
    return {name: (row["updated"], row["hot"]) for name, row in heap_only_counters(engine).items()}


def delta(after: dict[str, tuple[int, int]], before: dict[str, tuple[int, int]]) -> dict[str, Any]:
    out = {}
    for name, (upd, hot) in sorted(after.items()):
        upd0, hot0 = before.get(name, (0, 0))
        if upd - upd0:
            out[name] = {"updated": upd - upd0, "hot": hot - hot0}
    return out


def sizes(engine: sa.Engine) -> dict[str, dict[str, int]]:
    query = (
        "SELECT relname, pg_relation_size(oid), pg_indexes_size(oid), pg_total_relation_size(oid)"
        " FROM pg_class WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace"
    )
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(query).all()
        connection.rollback()
    return {
        name: {"heap": heap, "indexes": indexes, "toast": total - heap - indexes, "total": total}
        for name, heap, indexes, total in rows
    }


def span_rate(engine: sa.Engine, table: str, column: str) -> float:
    """Rows per second from the first to the last `column` of `table`."""
    query = (
        f"SELECT count(*), extract(epoch FROM max({column}) - min({column}))"
        f" FROM {table} WHERE {column} IS NOT NULL"
    )
    with engine.connect() as connection:
        count, seconds = connection.exec_driver_sql(query).one()
        connection.rollback()
    return float(count) / max(float(seconds or 0), 1e-3)


def open_messages(engine: sa.Engine) -> str:
    """The count of undelivered messages, from the relay's small queue where there is one."""
    queue = scalar(engine, "SELECT to_regclass('hookinbox_outbox_queue') IS NOT NULL")
    if queue:
        return "SELECT count(*) FROM hookinbox_outbox_queue WHERE state = 'pending'"
    return "SELECT count(*) FROM hookinbox_outbox WHERE status IN ('pending', 'delivering')"


def side(
    name: str, tree: Path, args: argparse.Namespace, compression: str = "off"
) -> dict[str, Any]:
    log(f"{name}: {tree}")
    with database("postgres") as url:
        engine = open_engine(url)
        try:
            subprocess.run(
                hookinbox("migrate", APP, "--database-url", url),
                cwd=tree,
                env=environment(tree, compression),
                check=True,
                capture_output=True,
            )
            autovacuum_off(engine)
            if tree == ROOT:
                set_fill_factors(engine, args.fill_factor)
            start = counters(engine)
            requests = request_file(args.events)
            try:
                command = hookinbox(
                    "serve",
                    APP,
                    "--database-url",
                    url,
                    "--port",
                    "{port}",
                    "--workers",
                    "1",
                    "--log-level",
                    "warning",
                    "--no-worker",
                )
                with server(command, env=environment(tree, compression)) as serving:
                    load = fixed_rate(
                        f"{serving.base_url}/webhooks/stripe",
                        requests,
                        rate=args.rate,
                        seconds=args.events / args.rate,
                    )
            finally:
                requests.unlink()
            stored = int(scalar(engine, "SELECT count(*) FROM hookinbox_events"))
            log(f"  ingest: {load.requests} sent, {load.errors} errors, {stored} stored")
            backends_gone(engine)
            ingested = counters(engine)
            worker = ("worker", APP, "--database-url", url, "--no-relay", "--log-level", "warning")
            with running(tree, *worker) as process:
                wait_for(
                    engine, "SELECT count(*) FROM hookinbox_event_queue", process, args.timeout
                )
            backends_gone(engine)
            processed = counters(engine)
            relay = ("relay", APP, "--database-url", url, "--log-level", "warning")
            with running(tree, *relay) as process:
                wait_for(engine, open_messages(engine), process, args.timeout)
            backends_gone(engine)
            relayed = counters(engine)
            document = {
                "side": name,
                "events": stored,
                "ingest": load,
                "events_per_second": span_rate(engine, "hookinbox_events", "processed_at"),
                "messages_per_second": span_rate(engine, "hookinbox_outbox", "delivered_at"),
                "messages": int(scalar(engine, "SELECT count(*) FROM hookinbox_outbox")),
                "updates": {
                    "ingest": delta(ingested, start),
                    "processing": delta(processed, ingested),
                    "relay": delta(relayed, processed),
                    "all": delta(relayed, start),
                },
                "sizes": sizes(engine),
            }
        finally:
            engine.dispose()
    return document


def kept(document: dict[str, Any]) -> dict[str, int]:
    return {n: s["total"] for n, s in document["sizes"].items() if n.startswith("hookinbox_")}


def share(updates: dict[str, Any], table: str | None = None) -> tuple[int, int]:
    rows = [v for n, v in updates.items() if table is None or n == table]
    return sum(r["hot"] for r in rows), sum(r["updated"] for r in rows)


def percent(hot: int, updated: int) -> str:
    return f"{hot:,} / {updated:,} ({100 * hot / updated:.1f} %)" if updated else "none"


def render(sides: list[dict[str, Any]]) -> str:
    names = [s["side"] for s in sides]
    tables = sorted(set().union(*(kept(s) for s in sides)))
    lines = [
        "| hookinbox table | " + " | ".join(f"{n}: B/event" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for table in tables:
        cells = [f"{kept(s).get(table, 0) / s['events']:,.0f}" for s in sides]
        lines.append(f"| {table} | " + " | ".join(cells) + " |")
    totals = [sum(kept(s).values()) / s["events"] for s in sides]
    lines.append(
        "| **every hookinbox table** | " + " | ".join(f"**{t:,.0f}**" for t in totals) + " |"
    )
    shop = [
        sum(v["total"] for n, v in s["sizes"].items() if n.startswith("shop_")) / s["events"]
        for s in sides
    ]
    lines.append("| (the shop's own tables) | " + " | ".join(f"{t:,.0f}" for t in shop) + " |")
    lines += [
        "",
        "| heap-only updates (hot / updated) | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    every = sorted(set().union(*(s["updates"]["all"] for s in sides)))
    for table in every:
        cells = [percent(*share(s["updates"]["all"], table)) for s in sides]
        lines.append(f"| {table} | " + " | ".join(cells) + " |")
    lines.append(
        "| **all hookinbox updates** | "
        + " | ".join(f"**{percent(*share(s['updates']['all']))}**" for s in sides)
        + " |"
    )
    lines += ["", "| rate | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in (
        ("events_per_second", "processing, events/s (1 worker)"),
        ("messages_per_second", "relay, messages/s (1 relay)"),
    ):
        lines.append(f"| {label} | " + " | ".join(f"{s[key]:,.0f}" for s in sides) + " |")
    base = sides[0]
    if len(sides) > 1:
        lines.append("")
    for this, total in zip(sides[1:], totals[1:], strict=True):
        lines.append(
            f"{this['side']} / {base['side']}: bytes kept per event {total / totals[0]:.2f}x,"
            f" processing {this['events_per_second'] / base['events_per_second']:.2f}x,"
            f" relay {this['messages_per_second'] / base['messages_per_second']:.2f}x"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=1_000.0, help="deliveries/s sent")
    parser.add_argument(
        "--baseline-ref",
        default=DEFAULT_BASELINE,
        help="git ref to compare with; '' for this tree alone",
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="per drain, seconds")
    parser.add_argument(
        "--fill-factor",
        action="append",
        default=[],
        metavar="TABLE=PERCENT",
        help="this tree's side: a table's fill factor instead of its schema's",
    )
    parser.add_argument(
        "--compression",
        choices=["off", "zlib", "both"],
        default="off",
        help="this tree's HOOKINBOX_COMPRESSION; both: this tree twice, off then zlib",
    )
    parser.add_argument("--smoke", action="store_true", help="300 events (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.events, args.rate = 300, 300.0
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    sides = []
    if args.baseline_ref:
        with checkout(args.baseline_ref) as tree:
            sides.append(side(f"baseline {args.baseline_ref}", tree, args))
    for compression in ("off", "zlib") if args.compression == "both" else (args.compression,):
        name = "this tree" if compression == "off" else f"this tree, {compression}"
        sides.append(side(name, ROOT, args, compression))
    text = render(sides)
    path = save("space", {"args": vars(args), "sides": sides, "table": text})
    print(text)
    log(f"raw results: {path}")


if __name__ == "__main__":
    main()
