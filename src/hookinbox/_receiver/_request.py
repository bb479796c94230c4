"""`Request`: one HTTP request on a source's path, as an adapter hands it to the pipeline.

The pipeline's input, as `Reply` is its output: an adapter of any web framework fills one from
its own request and sends back the `Reply` (`inbox.handle`, `await inbox.ahandle`). It holds
what the server gave, unread and unparsed: the body's bytes stay where they are until the
pipeline reads them with the inbox's cap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookinbox._headers import HeaderValues, normalize_headers, normalize_raw_headers
from hookinbox._receiver._body import Read, Receive
from hookinbox._receiver._reply import Reply

RequestHeaders = Mapping[str, str] | Iterable[tuple[str, str]] | Iterable[tuple[bytes, bytes]]
"""A request's headers as servers hand them over: text pairs or a mapping (WSGI, Django,
Flask), or an ASGI scope's `(bytes, bytes)` pairs."""


# Not frozen: a frozen dataclass sets each field through `object.__setattr__`, about twice the
# cost of building this one, and one is built for every delivery on the ASGI path.
@dataclass(slots=True)
class Request:
    """One HTTP request on a source's path (`POST`, or a handshake's `GET` or `HEAD`)."""

    method: str
    """The HTTP method: `POST` delivers; `GET` and `HEAD` ask for a source's handshake (405
    where it has none); any other is answered 405."""
    source: str
    """The source's name, the last segment of the path (`/webhooks/{source}`)."""
    headers: RequestHeaders
    """The headers as the server gave them (names in any case, values as latin-1 text or
    bytes): each value is read as the text its bytes spell in UTF-8 (docs/ingest.md)."""
    query: str | bytes = b""
    """The raw query string, read only by a source that reads it (and by handshakes)."""
    body: bytes | Receive | Read = b""
    """The body's bytes, or where to read them: the ASGI `receive` callable (`ahandle`), or a
    blocking stream's `read(n)` (`handle`). Read with the inbox's cap and, from `receive`,
    within its `body_timeout`; never read for an unknown source."""
    content_length: str | None = None
    """The Content-Length header where `headers` lack it (a WSGI environ's `CONTENT_LENGTH`);
    None: the one among `headers`, if any."""


class Pipeline(Protocol):
    """What an adapter needs of an inbox: the pipeline's two entries, nothing else. Every
    inbox is one (`Inbox`, `ClaimInbox`), and so is every receiver; naming this rather than
    the inbox keeps the HTTP layer below the facade, types included."""

    def handle(self, request: Request) -> Reply:
        """The reply to `request`, blocking (`body`: bytes or a `read(n)`)."""
        ...

    async def ahandle(self, request: Request) -> Reply | None:
        """The reply to `request` on an event loop (`body`: bytes or an ASGI `receive`);
        None if the client left before its body arrived."""
        ...


def request_headers(headers: RequestHeaders) -> HeaderValues:
    """The headers by the one rule for header bytes, whichever form the server gave them in.

    Asked on every delivery (twice: the pipeline reads them, then `verify`), so the forms the
    servers give are told apart by their type first, before the slower ABC check."""
    kind = type(headers)
    if kind is HeaderValues:
        return headers  # type: ignore[return-value]
    pairs: list[Any] | tuple[Any, ...]
    if kind is list or kind is tuple:
        pairs = headers  # type: ignore[assignment]
    elif isinstance(headers, Mapping):
        return normalize_headers(headers)
    else:
        pairs = list(headers)  # looked at twice below: an iterator only once
    if pairs and type(pairs[0][0]) is bytes:
        return normalize_raw_headers(pairs)
    return normalize_headers(pairs)
