"""HTTP/1.1 over a bare socket, for requests no client library would agree to send.

Each exchange is one fresh connection that the request asks to close. The body goes out in
pieces, and the client stops sending as soon as the server has answered: a server that refuses
a body early (413 from Content-Length) then closes with our bytes unread, and a client that kept
writing would meet a reset that can destroy the answer before it is read.
"""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

HEADER_END = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class RawResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes = b""

    @property
    def media_type(self) -> str:
        return self.headers.get("content-type", "").partition(";")[0].strip().lower()

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class Exchange:
    """What came back: the response, or none (`closed` says how the connection ended)."""

    response: RawResponse | None
    closed: str
    """"eof" (the server closed), "reset", or "timeout" (still open when we gave up)."""
    seconds: float


def request_head(
    method: str, path: bytes, headers: Iterable[tuple[bytes, bytes]], *, close: bool = True
) -> bytes:
    lines = [method.encode() + b" " + path + b" HTTP/1.1", b"Host: 127.0.0.1"]
    if close:
        lines.append(b"Connection: close")
    lines.extend(name + b": " + value for name, value in headers)
    return b"\r\n".join(lines) + HEADER_END


def exchange(
    port: int,
    head: bytes,
    body: Iterable[bytes] = (),
    *,
    timeout: float = 15,
    pause: float = 0.0,
) -> Exchange:
    """Send `head`, then each piece of `body` (`pause` seconds apart) until the server answers;
    read until it closes or `timeout` passes."""
    started = time.monotonic()
    received = bytearray()
    closed = "timeout"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(head)
            for piece in body:
                if _readable(sock, pause):
                    break  # the server has answered (or closed): the rest is not wanted
                sock.sendall(piece)
            closed = _read_until_closed(sock, received, started + timeout)
        except (BrokenPipeError, ConnectionResetError):
            closed = "reset"
            try:
                _read_until_closed(sock, received, started + timeout)
            except OSError:
                pass
    return Exchange(parse_response(bytes(received)), closed, time.monotonic() - started)


def _readable(sock: socket.socket, wait: float) -> bool:
    readable, _, _ = select.select([sock], [], [], wait)
    return bool(readable)


def _read_until_closed(sock: socket.socket, into: bytearray, deadline: float) -> str:
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not _readable(sock, left):
            return "timeout"
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return "reset"
        if not data:
            return "eof"
        into.extend(data)


def parse_response(raw: bytes) -> RawResponse | None:
    """The first response in `raw`, or None when no complete status line and headers came."""
    head, found, rest = raw.partition(HEADER_END)
    if not found:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "")
    body = rest[: int(length)] if length.isdigit() else rest
    return RawResponse(int(parts[1]), headers, body)
