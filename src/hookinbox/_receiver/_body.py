"""Reading a request's body with the inbox's cap: never buffered past it, never waited for long.

Two sources of bytes, one rule: a body whose Content-Length announces more than the cap is
refused before a byte is read, and one without (chunked) as soon as it passes the cap
(`BodyTooLarge`, answered 413). From an ASGI `receive` callable the whole body has one deadline
(`body_timeout`, `BodyTimeout`, answered 408); from a blocking `read(n)` the server's own
timeouts apply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from hookinbox._errors import BodyTooLarge
from hookinbox._receiver._deadlines import within

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
"""An ASGI `receive` callable: the body in `http.request` messages, or `http.disconnect`."""
Read = Callable[[int], bytes]
"""A blocking stream's `read(n)`: at most `n` bytes, b"" at the end."""

CHUNK_SIZE = 64 * 1024


class ClientGone(Exception):
    """The client disconnected before sending its whole body."""


class BodyTimeout(Exception):
    """The client did not send its whole body within the receiver's `body_timeout`."""


def declared_size(value: str | bytes | None) -> int | None:
    """The size a Content-Length header announces, if it is a plain decimal number."""
    if value is None or not value.isascii() or not value.isdigit():
        return None
    return int(value)


async def read_body(
    receive: Receive, declared: int | None, limit: int, seconds: float | None
) -> bytes:
    """The body from ASGI messages within `seconds` (None: no deadline), refusing (without
    buffering) anything over `limit` bytes. The deadline is `within`'s, on asyncio; another
    loop passes None and bounds `receive` itself (`_anyio.receive_within`)."""
    if declared is not None and declared > limit:
        raise BodyTooLarge()
    try:
        async with within(seconds):
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone()
            body: bytes = message.get("body", b"")
            if len(body) > limit:
                raise BodyTooLarge()
            if not message.get("more_body", False):
                return body  # the usual delivery: one message, nothing to join
            chunks = [body]
            size = len(body)
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge()
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise BodyTimeout() from None


def read_capped(read: Read, declared: int | None, limit: int) -> bytes:
    """Read a body until `read` returns b"", refusing (without buffering) more than `limit`.

    `declared` is the size Content-Length announces, if any: a body that announces more than
    the limit is refused before a byte is read. A body without one (chunked) is read a chunk
    at a time and refused as soon as it passes the limit.
    """
    if declared is not None and declared > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    while True:
        # Never ask for more than one byte past the limit: that byte is enough to refuse.
        chunk = read(min(CHUNK_SIZE, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
