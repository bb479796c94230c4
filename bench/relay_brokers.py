"""Benchmark: relay messages/s to each kind of destination, in one run (issue 51).

    python bench/relay_brokers.py               # 3 runs of 2,000 messages per kind: ~1 min
    python bench/relay_brokers.py --smoke       # seconds; what CI runs to keep this working

For each destination kind in `KINDS` (the HTTP destination against a loopback receiver, the
RabbitMQ destination with publisher confirms on a durable queue, the JetStream destination on
a stream of its own), in alternating runs on the same machine: `--messages` outbox messages
are queued (events processed with the relay off), then one in-process worker's relay
(`relay_concurrency` 4, the default) delivers them, timed from its start to the last
`delivered` row. Every run checks that each message arrived (receiver: by Idempotency-Key;
RabbitMQ: by message_id; JetStream: by Nats-Msg-Id). The receiver is a separate process, so
that it does not share the relay's GIL: it answers 200 at once, like the cheapest endpoint.
Prints the median messages/s per kind and each kind's ratio to HTTP. Raw JSON under
bench/results/. A destination kind is one entry of `KINDS`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import sqlalchemy as sa

from bench._common import SECRET, database, free_port, save, sign, stripe_body, summary
from hookinbox import Event, HandlerContext, Inbox, WorkerOptions
from hookinbox._storage._schema import outbox
from hookinbox.outbox import (
    Destination,
    HTTPDestination,
    JetStreamDestination,
    RabbitMQDestination,
)
from hookinbox.sources import Stripe

RABBITMQ_URL = os.environ.get("HOOKINBOX_BENCH_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672/")
NATS_URL = os.environ.get("HOOKINBOX_BENCH_NATS_URL", "nats://127.0.0.1:4222")

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx's pool uses it
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        key = self.headers.get("Idempotency-Key", "")
        sys.stdout.write(key + "\\n")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.daemon_threads = True
server.serve_forever()
"""

Received = Callable[[], list[str]]
"""The keys (or message ids) the far side got, read after the run."""
Kind = Callable[[], Any]
"""A context manager factory yielding (destination, received)."""


@contextmanager
def http_receiver() -> Iterator[tuple[Destination, Received]]:
    port = free_port()
    log = Path(f"/tmp/bench-receiver-{uuid.uuid4().hex[:8]}.log")
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-c", RECEIVER, str(port)], stdout=out)
    try:
        deadline = time.monotonic() + 10
        import socket

        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        destination = HTTPDestination("target", url=f"http://127.0.0.1:{port}/in", timeout=10)

        def received() -> list[str]:
            process.terminate()
            process.wait(timeout=10)
            return log.read_text().split()

        yield destination, received
        destination.close()
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)
        log.unlink(missing_ok=True)


@contextmanager
def rabbitmq_queue() -> Iterator[tuple[Destination, Received]]:
    import aio_pika

    name = f"hookinbox-bench-{uuid.uuid4().hex[:10]}"

    async def declare() -> None:
        async with await aio_pika.connect(RABBITMQ_URL) as connection:
            channel = await connection.channel()
            await channel.declare_queue(name, durable=True)

    async def drain_and_delete() -> list[str]:
        ids: list[str] = []
        async with await aio_pika.connect(RABBITMQ_URL) as connection:
            channel = await connection.channel()
            queue = await channel.declare_queue(name, durable=True, passive=True)
            while (message := await queue.get(fail=False, no_ack=True)) is not None:
                ids.append(str(message.message_id))
            await queue.delete(if_unused=False, if_empty=False)
        return ids

    asyncio.run(declare())
    destination = RabbitMQDestination("target", RABBITMQ_URL, routing_key=name, timeout=10)
    try:
        yield destination, lambda: asyncio.run(drain_and_delete())
    finally:
        destination.close()


@contextmanager
def jetstream_stream() -> Iterator[tuple[Destination, Received]]:
    import nats
    from nats.js.api import StreamConfig

    token = uuid.uuid4().hex[:10]
    name, subject = f"HOOKINBOX_BENCH_{token}", f"hookinbox.bench.{token}"

    async def create() -> None:
        client = await nats.connect(NATS_URL)
        try:
            await client.jetstream().add_stream(StreamConfig(name=name, subjects=[subject]))
        finally:
            await client.close()

    async def read_and_delete() -> list[str]:
        client = await nats.connect(NATS_URL)
        try:
            jetstream = client.jetstream()
            last = (await jetstream.stream_info(name)).state.last_seq
            ids = []
            for sequence in range(1, last + 1):
                stored = await jetstream.get_msg(name, sequence)
                ids.append((stored.headers or {}).get("Nats-Msg-Id", ""))
            await jetstream.delete_stream(name)
            return ids
        finally:
            await client.close()

    asyncio.run(create())
    destination = JetStreamDestination("target", url=NATS_URL, subject=subject, timeout=10)
    try:
        yield destination, lambda: asyncio.run(read_and_delete())
    finally:
        destination.close()


KINDS: dict[str, Kind] = {
    "http": http_receiver,
    "rabbitmq": rabbitmq_queue,
    "jetstream": jetstream_stream,
}
"""Destination kinds measured: name -> a factory of (destination, received)."""


def delivered(inbox: Inbox) -> int:
    with inbox.store.engine.connect() as connection:
        query = sa.select(sa.func.count()).where(outbox.c.status == "delivered")
        return int(connection.execute(query).scalar_one())


def one_run(kind: str, backend: str, messages: int) -> float:
    """Messages/s of one relay draining `messages` to a destination of `kind`."""
    with database(backend) as url, KINDS[kind]() as (destination, received):
        inbox = Inbox(url)
        inbox.migrate()
        inbox.add_source(Stripe(secret=SECRET))
        inbox.add_destination(destination)

        @inbox.handler("stripe", "checkout.session.completed")
        def fan_out(event: Event, ctx: HandlerContext) -> None:
            for number in range(messages):
                ctx.outbox.send("target", {"order": number, "note": "x" * 200})

        body = stripe_body("evt_fan_out", "pi_1")
        assert inbox.receive("stripe", {"Stripe-Signature": sign(body)}, body).ok
        inbox.worker(WorkerOptions(handle_signals=False), prune=False, relay=False).run_until_idle()
        worker = inbox.worker(WorkerOptions(handle_signals=False), prune=False)
        thread = threading.Thread(target=worker.run, daemon=True)
        started = time.perf_counter()
        thread.start()
        while delivered(inbox) < messages:
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
        worker.stop()
        thread.join(timeout=30)
        inbox.close()
        got = received()
        if sorted(set(got)) != sorted(got) or len(got) != messages:
            raise SystemExit(f"{kind}: {len(got)} arrived ({len(set(got))} distinct) of {messages}")
    return messages / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, of: "
                        + ", ".join(KINDS))  # fmt: skip
    parser.add_argument("--smoke", action="store_true", help="200 messages, 1 run")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.runs = 200, 1
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind(s): {', '.join(unknown)}; known: {', '.join(KINDS)}")
    rates: dict[str, list[float]] = {kind: [] for kind in kinds}
    for run in range(args.runs):
        for kind in kinds if run % 2 == 0 else reversed(kinds):  # alternate who goes first
            rate = one_run(kind, args.backend, args.messages)
            rates[kind].append(rate)
            print(f"run {run + 1} {kind}: {rate:,.0f} messages/s", file=sys.stderr)
    results = {kind: summary(values) for kind, values in rates.items()}
    base = statistics.median(rates["http"]) if "http" in rates else None
    print(f"\nrelay, {args.messages} messages, {args.backend}, median of {args.runs}:")
    for kind, figures in results.items():
        ratio = f"  {figures['median'] / base:.2f}x http" if base else ""
        print(f"  {kind:<10} {figures['median']:>8,.0f} messages/s{ratio}")
    path = save("relay_brokers", {"messages": args.messages, "backend": args.backend,
                                  "runs": rates, "results": results})  # fmt: skip
    print(f"raw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
