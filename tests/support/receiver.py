"""A loopback HTTP receiver for outbox tests: it records every try, fails on cue, dedupes by key.

It plays the other side of the outbox, a Stripe-like API that applies each `Idempotency-Key`
once, and lets a test script failures per key and attempt: an HTTP status, a stall past the
client's timeout, or a connection reset.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Plan = Callable[[str, int], str]
"""(key, try number from 1) -> "ok", "400", "503", "429:<s>", "timeout", "reset" or "slow:<s>"."""


def always_ok(_key: str, _attempt: int) -> str:
    return "ok"


@dataclass
class Receiver:
    plan: Plan = always_ok
    tries: list[tuple[str, Any, str]] = field(default_factory=list)
    applied: dict[str, Any] = field(default_factory=dict)
    overlaps: int = 0
    """Tries that arrived while another try of the same key was still being answered."""
    url: str = ""
    _in_flight: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attempts(self, key: str) -> int:
        with self._lock:
            return sum(1 for k, _, _ in self.tries if k == key)

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        key = request.headers.get("Idempotency-Key", "")
        length = int(request.headers.get("Content-Length", "0"))
        payload = json.loads(request.rfile.read(length) or b"null")
        with self._lock:
            attempt = 1 + sum(1 for k, _, _ in self.tries if k == key)
            action = self.plan(key, attempt)
            self.tries.append((key, payload, action))
            if self._in_flight[key]:
                self.overlaps += 1
            self._in_flight[key] += 1
        try:
            self._answer(request, key, payload, action)
        finally:
            with self._lock:
                self._in_flight[key] -= 1

    def _answer(self, request: BaseHTTPRequestHandler, key: str, payload: Any, action: str) -> None:
        if action == "reset":
            # SO_LINGER 0: close() sends RST, as a crashed or overloaded server would.
            request.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            request.close_connection = True
            request.connection.close()
            return
        if action == "timeout":
            time.sleep(3)  # longer than the destination's timeout in these tests
            return
        if action.startswith("slow:"):
            time.sleep(float(action.split(":", 1)[1]))
            action = "ok"
        if action == "ok":
            with self._lock:
                self.applied.setdefault(key, payload)  # applied once, however often sent
            self._reply(request, 200)
        elif action.startswith("429:"):
            self._reply(request, 429, {"Retry-After": action.split(":", 1)[1]})
        else:
            self._reply(request, int(action))

    @staticmethod
    def _reply(
        request: BaseHTTPRequestHandler, status: int, headers: dict[str, str] | None = None
    ) -> None:
        request.send_response(status)
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.send_header("Content-Length", "0")
        request.end_headers()


@contextmanager
def running_receiver(plan: Plan = always_ok) -> Iterator[Receiver]:
    receiver = Receiver(plan)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            receiver.handle(self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/shipments"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
