"""Benchmark: the CPU an unauthenticated signature header can buy (issue 19, item 4).

    python bench/signature_header.py              # 100,000 entries, 5 requests: ~20 s
    python bench/signature_header.py --smoke      # seconds; what CI runs to keep this working

A `Stripe-Signature` of `--entries` wrong `v1` entries with the right one last (6.5 MiB at
100,000), against the same bytes in a header no source reads (`X-Other`):
- in process: `Stripe.authenticate` on that header, `time.process_time`, median of 7;
- over HTTP: one `hookinbox serve --no-worker` process on SQLite; the server's CPU (user +
  system of the process and its children, from /proc/PID/stat, in clock ticks of 10 ms) per
  request, median of `--requests`, one request at a time.
Before the cap every entry was parsed and compared (and the delivery accepted); with it the
header is refused (401) before any HMAC, for what any header of that size costs to parse.
Raw JSON under bench/results/.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import SECRET, database, hookinbox_serve, save, server, summary
from hookinbox._errors import VerificationError
from hookinbox._headers import normalize_headers
from hookinbox.sources import Stripe

APP = "bench.peers.hookinbox_app:inbox"
TICK = os.sysconf("SC_CLK_TCK")


def delivery(entries: int, event_id: str) -> tuple[str, bytes]:
    """The signature header value (wrong entries, then the right one) and the body."""
    now = int(time.time())
    body = json.dumps({"id": event_id, "type": "invoice.paid", "created": now}).encode()
    right = hmac.new(SECRET.encode(), f"{now}.".encode() + body, hashlib.sha256).hexdigest()
    wrong = ",".join(["v1=" + "0" * 64] * entries)
    return f"t={now},{wrong},v1={right}", body


def in_process(entries: int) -> dict[str, object]:
    header, body = delivery(entries, "evt_in_process")
    source = Stripe(secret=SECRET)
    headers = normalize_headers({"Stripe-Signature": header})
    times, answer = [], ""
    for _ in range(7):
        started = time.process_time()
        try:
            source.authenticate(headers, body, now=time.time())
            answer = "accepted"
        except VerificationError as error:
            answer = f"refused: {error.message}"
        times.append((time.process_time() - started) * 1000)
    return {"cpu_ms": summary(times), "answer": answer, "header_bytes": len(header)}


def cpu_seconds(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / TICK


def post(base_url: str, name: str, value: str, body: bytes) -> str:
    host, port = base_url.removeprefix("http://").split(":")
    head = (
        f"POST /webhooks/stripe HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{name}: {value}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head.encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer.split(b"\r\n", 1)[0].decode()


def over_http(entries: int, requests: int) -> list[dict[str, object]]:
    results = []
    with database("sqlite") as url, server(hookinbox_serve(APP, url)) as running:
        for name in ("Stripe-Signature", "X-Other"):
            costs, status = [], ""
            for n in range(requests):
                value, body = delivery(entries, f"evt_{name}_{n}")
                before = cpu_seconds(running.pids)
                status = post(running.base_url, name, value, body)
                time.sleep(0.2)  # let the server finish logging before reading its CPU
                costs.append((cpu_seconds(running.pids) - before) * 1000)
            results.append({"header": name, "cpu_ms": summary(costs), "last_answer": status})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="1,000 entries, 2 requests")
    args = parser.parse_args()
    if args.smoke:
        args.entries, args.requests = 1_000, 2
    local = in_process(args.entries)
    print(
        f"in process, {args.entries:,} entries ({local['header_bytes']:,} bytes): "
        f"{local['answer']}; CPU median {local['cpu_ms']['median']:.2f} ms"  # type: ignore[index]
    )
    remote = over_http(args.entries, args.requests)
    for row in remote:
        print(
            f"server, {args.entries:,} entries in {row['header']}: {row['last_answer']}; "
            f"CPU per request median {row['cpu_ms']['median']:.0f} ms"  # type: ignore[index]
        )
    document = {"entries": args.entries, "in_process": local, "server": remote}
    path = save("signature_header", document)
    print(f"raw results: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
