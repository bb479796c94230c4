"""A provider in the test bed's client host: `python -m tests.ha.load ...`.

Sends Stripe-signed events through the load balancer at a fixed rate, a share of them twice at
once, and resends every event not answered 2xx (honouring Retry-After, at most a second), as a
provider retries, until it is acknowledged. Meanwhile it polls each application host's
`/readyz`. Every attempt and every probe is one JSON line in --out, with wall-clock times that
the test lines up with the moment it injected a fault. New events stop when --stop-file
appears; the program ends once every event sent is acknowledged (exit 0) or --drain-timeout
passes (exit 1), and writes the acknowledged ids to --out's `.acked` file.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import random
import time
from pathlib import Path
from typing import IO, Any

import httpx

from tests.ha.app import SECRET

DUPLICATE_SHARE = 0.1
MAX_WAIT = 1.0
PROBE_TIMEOUT = 5.0
"""Longer than /readyz may take (the ack deadline, 3 s): a probe that times out is a hang."""


def event_body(event_id: str, created: int) -> bytes:
    """The same bytes on every resend, as a provider's: only the signature is made anew."""
    return json.dumps(
        {"id": event_id, "object": "event", "type": "ha.test", "created": created,
         "data": {"object": {"id": event_id}}},
    ).encode()  # fmt: skip


def signed(body: bytes) -> dict[str, str]:
    t = int(time.time())
    mac = hmac.new(SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return {"Stripe-Signature": f"t={t},v1={mac}", "Content-Type": "application/json"}


class Provider:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.args = args
        self.out = out
        self.acked: set[str] = set()
        self.sent: list[str] = []
        self.open: set[asyncio.Task[None]] = set()

    def write(self, record: dict[str, Any]) -> None:
        self.out.write(json.dumps(record) + "\n")

    async def attempt(self, client: httpx.AsyncClient, event_id: str, body: bytes) -> float | None:
        """One delivery; the seconds to wait before the next, or None once acknowledged."""
        headers = signed(body)
        started = time.time()
        record: dict[str, Any] = {"kind": "attempt", "event": event_id, "t0": started}
        try:
            answer = await client.post(self.args.target, content=body, headers=headers)
        except httpx.HTTPError as error:
            record.update(t1=time.time(), status=0, error=type(error).__name__)
            self.write(record)
            return 0.5
        record.update(t1=time.time(), status=answer.status_code)
        retry_after = answer.headers.get("retry-after")
        if retry_after is not None:
            record["retry_after"] = retry_after
        self.write(record)
        if 200 <= answer.status_code < 300:
            self.acked.add(event_id)
            return None
        try:
            return min(float(retry_after or 0.5), MAX_WAIT)
        except ValueError:
            return 0.5

    async def deliver(self, client: httpx.AsyncClient, event_id: str, body: bytes) -> None:
        while event_id not in self.acked:
            wait = await self.attempt(client, event_id, body)
            if wait is None:
                return
            await asyncio.sleep(wait)

    def start(self, client: httpx.AsyncClient, event_id: str, body: bytes) -> None:
        task = asyncio.create_task(self.deliver(client, event_id, body))
        self.open.add(task)
        task.add_done_callback(self.open.discard)

    async def send(self, client: httpx.AsyncClient, stop: Path) -> None:
        interval = 1 / self.args.rate
        next_at = time.monotonic()
        number = 0
        while not stop.exists():
            number += 1
            event_id = f"evt_{self.args.run}_{number:06d}"
            self.sent.append(event_id)
            body = event_body(event_id, int(time.time()))
            self.start(client, event_id, body)
            if random.random() < DUPLICATE_SHARE:
                self.start(client, event_id, body)  # the same event twice at once
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def probe(self, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for url in self.args.ready:
                started = time.time()
                try:
                    answer = await client.get(url)
                    status = answer.status_code
                except httpx.HTTPError:
                    status = 0
                self.write({"kind": "ready", "url": url, "t0": started, "status": status})
            await asyncio.sleep(0.25)


async def main(args: argparse.Namespace) -> int:
    out_path = Path(args.out)
    with out_path.open("w", buffering=1) as out:
        provider = Provider(args, out)
        # Enough connections for every delivery in flight during an outage (30/s, each resent
        # about every second and answered after up to 3 s): a sender short of them would queue
        # deliveries in its own pool, and its clock would blame the receiver.
        limits = httpx.Limits(max_connections=2000, max_keepalive_connections=256)
        timeout = httpx.Timeout(args.timeout)
        async with (
            httpx.AsyncClient(limits=limits, timeout=timeout) as client,
            httpx.AsyncClient(timeout=PROBE_TIMEOUT) as prober,
        ):
            probing = asyncio.Event()
            probe = asyncio.create_task(provider.probe(prober, probing))
            await provider.send(client, Path(args.stop_file))
            deadline = time.monotonic() + args.drain_timeout
            while provider.open and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            probing.set()
            await probe
            for task in list(provider.open):
                task.cancel()
        Path(f"{args.out}.acked").write_text("\n".join(sorted(provider.acked)))
        provider.write({"kind": "summary", "sent": len(set(provider.sent)),
                        "acked": len(provider.acked)})  # fmt: skip
        return 0 if len(provider.acked) == len(set(provider.sent)) else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--target", required=True)
    parser.add_argument("--ready", action="append", default=[])
    parser.add_argument("--rate", type=float, default=30)
    parser.add_argument("--run", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--drain-timeout", type=float, default=90.0)
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse())))
