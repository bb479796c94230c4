"""Answers of a hostile or broken provider API, for the limits reconcile keeps (issue 45): a
body that drips a byte at a time, and a body far larger than any page. Each is an `Answer` of
tests/support/loopback.py, whose streamed bodies end when the connection closes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.support.loopback import Answer

MIB = 1024 * 1024
JSON = {"Content-Type": "application/json"}
EMPTY_PAGE = json.dumps({"object": "list", "data": [], "has_more": False}).encode()


def dripping(every: float) -> Answer:
    """A page's JSON whose last bytes never come: a space every `every` seconds, forever
    (until the client hangs up)."""

    def body() -> Iterator[bytes]:
        yield EMPTY_PAGE[:-1]
        while True:
            time.sleep(every)
            yield b" "

    return 200, JSON, body()


@dataclass
class Huge:
    """A page's JSON padded with spaces to `size` bytes, sent a MiB at a time; `sent` counts
    the bytes handed to the socket before the client hung up. With `declared`, the answer
    names its length (Content-Length) first."""

    size: int
    declared: bool = False
    sent: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self) -> Answer:
        headers = {**JSON, "Content-Length": str(self.size)} if self.declared else JSON
        return 200, headers, self._body()

    def _body(self) -> Iterator[bytes]:
        head, tail = EMPTY_PAGE[:-1], EMPTY_PAGE[-1:]
        padding = self.size - len(head) - len(tail)
        yield self._count(head)
        while padding > 0:
            chunk = b" " * min(MIB, padding)
            padding -= len(chunk)
            yield self._count(chunk)
        yield self._count(tail)

    def _count(self, chunk: bytes) -> bytes:
        with self.lock:
            self.sent += len(chunk)
        return chunk
