"""The blocking entries for WSGI frameworks (Flask, Django, anything with a stream).

Each makes a `Request` and hands it to the inbox's blocking entry, `inbox.handle`: the same
pipeline as the ASGI app's, in the same order (an unknown source is answered before a byte is
read; the body is read with the cap, never past it), over a `read(n)` function instead of ASGI
messages. Status codes stay the pipeline's to choose.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from hookinbox._receiver import Pipeline, Reply, Request


def receive_stream(
    inbox: Pipeline,
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
    return inbox.handle(Request("POST", source, headers, query, read, content_length))


def answer_get(
    inbox: Pipeline,
    source: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    query: str | bytes = "",
) -> Reply:
    """The answer to a GET or HEAD on a source's path: the source's handshake (Meta's
    `hub.challenge`, Dropbox's `challenge`, X's CRC, ...), or 405 with `Allow` where it has
    none. `query` is the raw query string. Nothing is read from a body, nothing is stored,
    and nothing blocks: an adapter of any framework calls it as it is."""
    return inbox.handle(Request("GET", source, headers, query))
