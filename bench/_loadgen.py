"""Open-loop load at a fixed rate, in its own process: `_loadgen.py URL FILE RATE SECONDS
CONCURRENCY COPIES`. Prints one JSON object (a `Load`).

Open loop: request i is due at start + i / RATE whether or not earlier ones have returned, so
a slow server shows as latency, not as a politely reduced rate (the coordinated-omission trap).
At most CONCURRENCY requests are in flight, one per keep-alive connection.

HTTP/1.1 is written and read by hand on asyncio streams, not with an HTTP client: the
requests are all alike (a POST with a body and a content-length answer), and a client library
spent about 0.5 ms of CPU per request, so one generator process could not offer more than
~1,500 requests/s on this machine, less than half of hookinbox's ingest ceiling.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from urllib.parse import urlsplit


def request_bytes(host: str, path: str, signature: bytes, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Stripe-Signature: {signature.decode()}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_answer(reader: asyncio.StreamReader) -> int:
    """One response: its status code (the body is read and dropped)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def main(url: str, path: str, rate: float, seconds: float, concurrency: int,
               copies: int) -> dict[str, float | int]:  # fmt: skip
    target = urlsplit(url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    lines = open(path, "rb").read().splitlines()
    requests = []
    for line in lines[::copies]:
        signature, body = line.split(b"\t", 1)
        requests.append(request_bytes(target.netloc, target.path, signature, body))
    total = min(len(requests), int(rate * seconds))
    latencies: list[float] = []
    errors = 0
    due: asyncio.Queue[tuple[bytes, float] | None] = asyncio.Queue()

    async def connection() -> None:
        nonlocal errors
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while (item := await due.get()) is not None:
            request, when = item
            try:
                if writer is None or reader is None:
                    reader, writer = await asyncio.open_connection(host, port)
                writer.write(request)
                if await read_answer(reader) >= 300:
                    errors += 1
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError):
                errors += 1
                if writer is not None:
                    writer.close()
                reader = writer = None
            latencies.append(time.perf_counter() - when)  # from when it was due
        if writer is not None:
            writer.close()

    workers = [asyncio.create_task(connection()) for _ in range(concurrency)]
    started = time.perf_counter()
    for index in range(total):
        when = started + index / rate
        delay = when - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        for _ in range(copies):
            due.put_nowait((requests[index], when))
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
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
