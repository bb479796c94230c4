"""A sender process: deliveries at a steady rate to a URL until SIGTERM, each answer timed.

    python -m tests.support.steady_sender URL OUT [--rate 50] [--concurrency 4] [--prefix evt_live_]

Each delivery is a POST of `{"id": "<prefix><n>"}` (n counts from 0), sent on the rate's
clock by one of `concurrency` senders (a sender whose answer is late skips no beat: the next
one waits for it). On SIGTERM the senders finish the request in hand, and OUT gets one line of
JSON per delivery: `[sent, seconds, status]`, with `sent` on the monotonic clock (which every
process of the machine shares, so a test can place the answers around what it did) and status
0 for no answer. A process of its own so that the test's work costs the sender no GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import time
from pathlib import Path

import httpx


async def _send(url: str, rate: float, concurrency: int, prefix: str) -> list[list[float]]:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    results: list[list[float]] = []
    tickets = asyncio.Queue[int](maxsize=concurrency)

    async def sender(client: httpx.AsyncClient) -> None:
        while True:
            number = await tickets.get()
            if number < 0:
                return
            sent = time.monotonic()
            try:
                response = await client.post(url, json={"id": f"{prefix}{number}"})
                status = response.status_code
            except httpx.HTTPError:
                status = 0
            results.append([sent, time.monotonic() - sent, status])

    async with httpx.AsyncClient(timeout=30) as client:
        senders = [asyncio.create_task(sender(client)) for _ in range(concurrency)]
        number = 0
        start = time.monotonic()
        while not stop.is_set():
            await tickets.put(number)
            number += 1
            pause = start + number / rate - time.monotonic()
            if pause > 0:
                try:
                    await asyncio.wait_for(stop.wait(), pause)
                except TimeoutError:
                    pass
        for _ in senders:
            await tickets.put(-1)
        await asyncio.gather(*senders)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--prefix", default="evt_live_")
    arguments = parser.parse_args()
    results = asyncio.run(
        _send(arguments.url, arguments.rate, arguments.concurrency, arguments.prefix)
    )
    arguments.out.write_text("".join(json.dumps(result) + "\n" for result in results))


if __name__ == "__main__":
    main()
