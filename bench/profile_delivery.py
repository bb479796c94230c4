"""What one delivery costs hookinbox itself: the ASGI app driven in process, no server, no socket.

    python bench/profile_delivery.py                       # SQLite, 20,000 deliveries
    python bench/profile_delivery.py --backend postgres --calls   # and cProfile's calls

Builds the benchmarks' inbox (`bench.peers.hookinbox_app`, one Stripe source, group commit)
on a fresh database, and hands its ASGI app (`inbox.asgi()`) `--deliveries` signed deliveries
as wrk's would arrive (the same headers and ~700-byte bodies), `--concurrency` at a time on
uvloop, with an in-memory `receive` and `send`. Prints the process's CPU per delivery (every
thread: the event loop and the group-commit writer) and the wall time. With `--calls`, the
event loop's thread runs under cProfile: the function calls per delivery and the functions
that cost most (the writer thread is not profiled: its share is in the CPU figure).

What it leaves out is the server's part (uvicorn's HTTP parsing and socket writes), which
`bench/profile_ingest.py` samples with py-spy under wrk. Run it from the checkout to measure
(`PYTHONPATH=src:. python bench/profile_delivery.py`): comparing two checkouts' figures on
one machine is an A/B that other load on the machine disturbs little.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import database, sign, stripe_body
from hookinbox._settings import Overrides
from hookinbox.cli._loading import load_app

APP = "bench.peers.hookinbox_app:inbox"


def deliveries(count: int) -> list[tuple[list[tuple[bytes, bytes]], bytes]]:
    run = uuid.uuid4().hex[:8]
    made = []
    for n in range(count):
        body = stripe_body(f"evt_{run}{n:09d}", f"pi_{run}{n:09d}")
        headers = [
            (b"host", b"127.0.0.1:8000"),
            (b"content-length", str(len(body)).encode()),
            (b"stripe-signature", sign(body).encode()),
            (b"content-type", b"application/json"),
        ]
        made.append((headers, body))
    return made


async def drive(app: Any, work: list[tuple[list[tuple[bytes, bytes]], bytes]],
                concurrency: int) -> list[int]:  # fmt: skip
    statuses: list[int] = []
    pending = iter(work)

    async def one(headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        scope = {"type": "http", "method": "POST", "path": "/webhooks/stripe", "root_path": "",
                 "headers": headers, "query_string": b"", "scheme": "http",
                 "http_version": "1.1", "asgi": {"version": "3.0"}}  # fmt: skip
        await app(scope, receive, send)

    async def lane() -> None:
        for headers, body in pending:
            await one(headers, body)

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return statuses


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "postgres", "mysql"))
    parser.add_argument("--deliveries", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--calls", action="store_true", help="cProfile the event loop's thread")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    import uvloop

    with database(args.backend) as url:
        inbox = load_app(APP, overrides=Overrides(database_url=url))
        inbox.migrate()  # type: ignore[attr-defined]
        app = inbox.asgi()
        loop = uvloop.new_event_loop()
        try:
            loop.run_until_complete(drive(app, deliveries(2_000), args.concurrency))  # warm-up
            work = deliveries(args.deliveries)
            profiler = cProfile.Profile() if args.calls else None
            cpu, wall = time.process_time(), time.perf_counter()
            if profiler is not None:
                profiler.enable()
            statuses = loop.run_until_complete(drive(app, work, args.concurrency))
            if profiler is not None:
                profiler.disable()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        finally:
            loop.close()
            inbox.close()
    refused = sum(status != 200 for status in statuses)
    count = len(statuses)
    print(f"{args.backend}: {count} deliveries ({refused} not 200), {cpu / count * 1e6:.1f} us "
          f"CPU per delivery, {count / wall:.0f} deliveries/s in process")  # fmt: skip
    if profiler is not None:
        stats = pstats.Stats(profiler)
        calls = sum(entry[1] for entry in stats.stats.values())  # type: ignore[attr-defined]
        print(f"event loop thread under cProfile: {calls / count:.1f} function calls per delivery")
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
