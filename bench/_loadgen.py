"""Open-loop load at a fixed rate, in its own process: `_loadgen.py URL FILE RATE SECONDS
CONCURRENCY COPIES`. Prints one JSON object (a `Load`).

Open loop: request i is due at start + i / RATE whether or not earlier ones have returned, so
a slow server shows as latency, not as a politely reduced rate (the coordinated-omission trap).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx


async def main(url: str, path: str, rate: float, seconds: float, concurrency: int,
               copies: int) -> dict[str, float | int]:  # fmt: skip
    lines = open(path, "rb").read().splitlines()
    deliveries = []
    for line in lines[::copies]:
        signature, body = line.split(b"\t", 1)
        deliveries.append(({"Stripe-Signature": signature.decode(),
                            "Content-Type": "application/json"}, body))  # fmt: skip
    total = min(len(deliveries), int(rate * seconds))
    latencies: list[float] = []
    errors = 0
    gate = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def send(headers: dict[str, str], body: bytes, due: float) -> None:
            nonlocal errors
            async with gate:
                try:
                    response = await client.post(url, headers=headers, content=body)
                    if response.status_code >= 300:
                        errors += 1
                except httpx.HTTPError:
                    errors += 1
                latencies.append(time.perf_counter() - due)  # from when it was due

        started = time.perf_counter()
        tasks = []
        for index in range(total):
            due = started + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            headers, body = deliveries[index]
            tasks += [asyncio.create_task(send(headers, body, due)) for _ in range(copies)]
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - started
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "rate": len(latencies) / elapsed,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": latencies[-1] * 1000,
        "errors": errors,
    }


if __name__ == "__main__":
    url, path, rate, seconds, concurrency, copies = sys.argv[1:7]
    result = asyncio.run(
        main(url, path, float(rate), float(seconds), int(concurrency), int(copies))
    )
    print(json.dumps(result))
