"""A real HTTP(S) server on loopback that answers through a plain function: what the fakes of
providers' APIs (`FakeStripeAPI`, ...) serve on, and hookinbox's own tests imitate other APIs
with (PayPal's certificate host and verification API, Mollie's API). The standard library's
`http.server`, one thread per connection: no dependency.

An answer's body is bytes (sent with its Content-Length), or an iterable of chunks, each sent
as it comes, without a Content-Length: the connection's close ends the body (HTTP/1.0), so a
test can answer slowly (a byte at a time) or without end (a body larger than any limit)."""

from __future__ import annotations

import ssl
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Response = tuple[int, dict[str, str], bytes | Iterable[bytes]]
"""Status, headers, and a body (bytes, or chunks streamed until the connection closes)."""
Respond = Callable[[Request], Response]


@dataclass
class Loopback:
    url: str
    requests: list[Request] = field(default_factory=list)

    def count(self, path: str) -> int:
        return sum(1 for r in list(self.requests) if r.path == path)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that stops reading (a size cap) or fails the TLS handshake (an untrusted
        # certificate) is what some tests are about; anything else is still printed.
        if not isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):
            super().handle_error(request, client_address)


@contextmanager
def serving(
    respond: Respond, tls: ssl.SSLContext | None = None, host: str = "127.0.0.1"
) -> Iterator[Loopback]:
    """Serve `respond` on `host`, a loopback address (HTTPS with `tls`), one thread per
    connection."""
    lock = threading.Lock()
    loopback = Loopback("")

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = Request(
                self.command,
                self.path,
                {k.lower(): v for k, v in self.headers.items()},
                self.rfile.read(length),
            )
            with lock:
                loopback.requests.append(request)
            status, headers, body = respond(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if isinstance(body, bytes):
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            self.end_headers()
            for chunk in body:  # streamed: the close ends it
                self.wfile.write(chunk)
                self.wfile.flush()

        do_GET = do_POST = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = _QuietServer((host, 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    scheme = "https" if tls is not None else "http"
    loopback.url = f"{scheme}://{host}:{server.server_address[1]}"
    # A short poll interval: shutdown() waits up to one interval, at every test's teardown.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield loopback
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class ServedFake:
    """A fake of a provider's API: a responder (`__call__`) that serves itself on loopback for
    the length of a `with` block. `url` is its base there, the `api_base` to give a source
    (plain HTTP, which a source accepts on a loopback address only); `requests` is what it was
    asked, in order."""

    url: str = ""
    _serving: AbstractContextManager[Loopback] | None = None
    _loopback: Loopback | None = None

    def __call__(self, request: Request) -> Response:
        raise NotImplementedError

    @property
    def requests(self) -> list[Request]:
        return [] if self._loopback is None else self._loopback.requests

    def __enter__(self) -> Self:
        if self._serving is not None:
            raise RuntimeError(f"{type(self).__name__} is serving already")
        self._serving = serving(self)
        self._loopback = self._serving.__enter__()
        self.url = self._loopback.url
        return self

    def __exit__(self, *exc_info: object) -> None:
        ending, self._serving = self._serving, None
        if ending is not None:
            ending.__exit__(None, None, None)
