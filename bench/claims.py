"""Benchmark: Redis claims. Claim mode's deduplication beside the SQL insert path, in one run.

    python bench/claims.py                     # everything: ~6 min
    python bench/claims.py --paths redis,sqlite --runs 1 --seconds 3   # a quick look
    python bench/claims.py --smoke             # seconds; what CI runs to keep this working

Two levels, each over every path (Redis claims; SQL on SQLite and on PostgreSQL):
- primitive, in this process: `--threads` threads deduplicate distinct events for `--seconds`.
  Redis: `RedisClaims.claim` + `complete` (SET NX PX, then the compare-and-set script: two
  round trips). SQL: the ingest upsert through the group committer, as `hookinbox serve`
  stores deliveries by default (concurrent threads share a transaction and its commit).
  Reported as claims/s;
- HTTP: one `hookinbox serve` process, saturated by wrk (64 connections; the smoke run uses the
  open-loop generator instead). Redis: claim mode (verify, claim, a handler that does nothing,
  mark done). SQL: `--no-worker` (verify, insert with group commit). Requests/s and p99.
The two modes promise different things (docs/redis-claims.md): a Redis claim stores nothing
durable and runs the handler in the request; the SQL path stores the event before answering.
Medians of `--runs` runs with min-max; raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis

from bench._common import (
    Load,
    database,
    fixed_rate,
    hookinbox_serve,
    request_file,
    save,
    server,
    sign,
    stripe_body,
    summary,
    wrk,
)
from hookinbox._model import NewDelivery
from hookinbox._storage import GroupCommit, GroupCommitter, Store
from hookinbox.claims import RedisClaims

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
CLAIMS_APP = "bench.peers.hookinbox_claims_app:inbox"
SQL_APP = "bench.peers.hookinbox_app:inbox"
PATHS = ("redis", "sqlite", "postgres")


@contextmanager
def redis_prefix() -> Iterator[str]:
    """A key prefix for one measurement; its keys are deleted afterwards."""
    prefix = f"bench-claims-{uuid.uuid4().hex[:8]}"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}:*", count=5000))
        for start in range(0, len(keys), 5000):
            client.delete(*keys[start : start + 5000])
        client.close()


@contextmanager
def dedup_operation(path: str) -> Iterator[Callable[[str], None]]:
    """One deduplication of a new event id on `path`, ready to call from many threads."""
    if path == "redis":
        with redis_prefix() as prefix:
            claims = RedisClaims.from_url(REDIS_URL, prefix=prefix)

            def claim_and_complete(event_id: str) -> None:
                claims.complete(claims.claim("stripe", event_id))

            try:
                yield claim_and_complete
            finally:
                claims.close()
        return
    body = stripe_body("evt_template", "pi_template")
    headers = {"content-type": "application/json", "stripe-signature": sign(body)}
    digest = hashlib.sha256(body).hexdigest()
    with database(path) as url:
        store = Store(url)
        store.migrate()
        committer = GroupCommitter(store, GroupCommit())

        def insert(event_id: str) -> None:
            now = datetime.now(UTC)
            delivery = NewDelivery(
                source="stripe",
                event_id=event_id,
                event_type="checkout.session.completed",
                occurred_at=now,
                received_at=now,
                body=body,
                headers=headers,
                body_sha256=digest,
            )
            committer.record(delivery)

        try:
            yield insert
        finally:
            committer.close()
            store.dispose()


def primitive(path: str, threads: int, seconds: float) -> float:
    """Distinct events deduplicated per second by `threads` threads for `seconds`."""
    run = uuid.uuid4().hex[:8]
    numbers = itertools.count()
    done = [0] * threads
    with dedup_operation(path) as operation:
        for _ in range(100):  # warm up: connections, pools, the script cache
            operation(f"warm_{run}_{next(numbers)}")
        deadline = time.monotonic() + seconds

        def loop(slot: int) -> None:
            while time.monotonic() < deadline:
                operation(f"evt_{run}_{next(numbers)}")
                done[slot] += 1

        started = time.monotonic()
        workers = [threading.Thread(target=loop, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(done) / (time.monotonic() - started)


def http(path: str, args: argparse.Namespace) -> list[Load]:
    """Saturation of one `hookinbox serve` process on `path`, `args.runs` times."""
    loads: list[Load] = []
    with _served(path) as running:
        target = f"{running.base_url}/webhooks/stripe"
        warmup = request_file(200)
        fixed_rate(target, warmup, rate=100, seconds=1)
        warmup.unlink()
        for _ in range(args.runs):
            if args.smoke:
                requests = request_file(400)
                loads.append(fixed_rate(target, requests, rate=200, seconds=2))
            else:
                requests = request_file(max(20_000, 8_000 * args.seconds))
                loads.append(wrk(target, requests, seconds=args.seconds))
            requests.unlink()
    return loads


@contextmanager
def _served(path: str) -> Iterator[Any]:
    if path == "redis":
        command = [sys.executable, "-m", "hookinbox", "serve", CLAIMS_APP, "--port", "{port}",
                   "--workers", "1", "--log-level", "warning"]  # fmt: skip
        with redis_prefix() as prefix:
            env = {"BENCH_CLAIMS_PREFIX": prefix, "BENCH_REDIS_URL": REDIS_URL}
            with server(command, env=env) as running:
                yield running
        return
    with database(path) as url, server(hookinbox_serve(SQL_APP, url, 1)) as running:
        yield running


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["| level | path | threads / processes | per second (median, min-max) | p99 ms |",
             "|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        rate = r["rate"]
        p99 = f"{r['p99_ms']['median']:.1f}" if "p99_ms" in r else "-"
        lines.append(
            f"| {r['level']} | {r['path']} | {r['parallel']} | {rate['median']:.0f} "
            f"({rate['min']:.0f}-{rate['max']:.0f}) | {p99} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--threads", default="1,4", help="thread counts of the primitive level")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, no wrk")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.seconds = 1, 1
    paths = args.paths.split(",")
    unknown = set(paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}; choose from {', '.join(PATHS)}")
    started = time.monotonic()
    rows: list[dict[str, Any]] = []
    for threads in (int(t) for t in args.threads.split(",")):
        for path in paths:
            print(f"primitive {path} x{threads} ...", file=sys.stderr, flush=True)
            rates = [primitive(path, threads, args.seconds) for _ in range(args.runs)]
            rows.append({"level": "primitive", "path": path, "parallel": threads,
                         "runs": rates, "rate": summary(rates)})  # fmt: skip
    for path in paths:
        print(f"http {path} ...", file=sys.stderr, flush=True)
        loads = http(path, args)
        rows.append({"level": "http", "path": path, "parallel": 1, "runs": loads,
                     "rate": summary([load.rate for load in loads]),
                     "p99_ms": summary([load.p99_ms for load in loads]),
                     "errors": sum(load.errors for load in loads)})  # fmt: skip
    table = render(rows)
    document = {"settings": vars(args), "results": rows, "wall_seconds": time.monotonic() - started}
    path = save("claims", document)
    print(table)
    print(f"\nraw results: {path} ({time.monotonic() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
