"""The demo's mail service: a loopback HTTP endpoint that applies each Idempotency-Key once.

It stands for the e-mail provider on the far side of the outbox: the relay may send a receipt
more than once (at least once), and the provider, deduplicating on the key, sends it once.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Mailbox:
    def __init__(self) -> None:
        self.tries: Counter[str] = Counter()
        self.sent: dict[str, Any] = {}
        self._lock = threading.Lock()
        mailbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key", "")
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    payload = json.loads(self.rfile.read(length) or b"null")
                except ValueError:
                    self.send_response(400)
                    self.end_headers()
                    return
                with mailbox._lock:
                    mailbox.tries[key] += 1
                    mailbox.sent.setdefault(key, payload)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/send"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Mailbox:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> tuple[int, int]:
        """(requests received, distinct e-mails sent)."""
        with self._lock:
            return sum(self.tries.values()), len(self.sent)

    def keys(self) -> set[str]:
        with self._lock:
            return set(self.sent)
