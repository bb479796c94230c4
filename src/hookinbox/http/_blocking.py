"""The delivery path for blocking (WSGI) frameworks: Flask, Django, anything with a stream.

The twin of `_app.answer`: the same steps in the same order (an unknown source is answered
before a byte is read; the body is read with the cap, never past it), over a `read(n)` function
instead of ASGI messages. Status codes stay the receiver's to choose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from hookinbox._errors import BodyTooLarge
from hookinbox._logging import logger
from hookinbox._receiver import BaseReceiver, Reply

if TYPE_CHECKING:
    from hookinbox._inbox import BaseInbox

log = logger("hookinbox.http")

CHUNK_SIZE = 64 * 1024


def read_capped(read: Callable[[int], bytes], declared: str | None, limit: int) -> bytes:
    """Read a body until `read` returns b"", refusing (without buffering) more than `limit`.

    `declared` is the Content-Length header, if any: a body that announces more than the limit
    is refused before a byte is read. A body without one (chunked) is read a chunk at a time
    and refused as soon as it passes the limit.
    """
    if declared is not None and declared.isdigit() and int(declared) > limit:
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


def receive_stream(
    inbox: BaseInbox,
    source: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    read: Callable[[int], bytes],
    content_length: str | None = None,
    *,
    query: str | bytes = "",
) -> Reply:
    """Read one delivery through `read(n)` and decide its reply (blocking).

    For adapters of WSGI frameworks: `read` is the request stream's read function,
    `content_length` the Content-Length header, if any, and `query` the raw query string
    (read only by a source that `reads_query`). An unknown source is answered before a byte
    is read; a body over the inbox's size cap is refused (413) before it is buffered (at once
    when Content-Length announces it). Errors raised by `read` itself (a client that hung up
    mid-body) propagate, for the framework to answer.
    """
    return answer_blocking(inbox._receiver(), source, headers, content_length, read, query)


def answer_get(
    inbox: BaseInbox,
    source: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    query: str | bytes = "",
) -> Reply:
    """The answer to a GET or HEAD on a source's path: the source's handshake (Meta's
    `hub.challenge`, Dropbox's `challenge`, X's CRC, ...), or 405 with `Allow` where it has
    none. `query` is the raw query string. Nothing is read from a body, nothing is stored,
    and nothing blocks: an adapter of any framework calls it as it is."""
    receiver = inbox._receiver()
    try:
        return receiver.answer_get(source, headers, query)
    except Exception:  # a bug in hookinbox: log it, answer without the traceback
        log.exception("unexpected error answering a handshake")
        return Reply(500, {"status": "error", "error": "internal"})


def answer_blocking(
    receiver: BaseReceiver,
    source: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    declared: str | None,
    read: Callable[[int], bytes],
    query: str | bytes = "",
) -> Reply:
    """Read one delivery through `read(n)` and decide its reply.

    Errors raised by `read` itself (a client that hung up mid-body) are the framework's to
    answer and propagate; anything else is a bug in hookinbox, logged and answered 500.
    """
    if source not in receiver.sources:
        return receiver.receive(source, {}, b"")  # answered before reading
    try:
        body = read_capped(read, declared, receiver.max_body_size)
    except BodyTooLarge:
        return receiver.reject_too_large(source)
    try:
        return receiver.receive(source, headers, body, query=query)
    except Exception:  # a bug in hookinbox: log it, answer without the traceback
        log.exception("unexpected error receiving a delivery")
        return Reply(500, {"status": "error", "error": "internal"})
