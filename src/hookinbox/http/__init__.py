"""HTTP: what a framework adapter is built on.

An adapter reads the delivery's raw body with the inbox's cap and answers what the inbox
decided; it never parses the body, never chooses a status code:

    reply = await receive_asgi(inbox, source, scope["headers"], receive)      # ASGI
    reply = receive_stream(inbox, source, headers, stream.read, content_length)  # WSGI
    reply = answer_get(inbox, source, headers, query_string)   # GET and HEAD: handshakes

    respond(reply.status_code, reply.headers, reply.content, reply.media_type)

`hookinbox.fastapi`, `hookinbox.flask` and `hookinbox.django` are written on these three
functions only. `inbox.asgi()` is the complete ASGI app (deliveries, probes, metrics); an
adapter that serves the probes too answers them with `health_probes(inbox)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookinbox.http._app import receive_asgi
from hookinbox.http._blocking import answer_get, receive_stream
from hookinbox.http._probes import Readiness

if TYPE_CHECKING:
    from hookinbox._inbox import BaseInbox

__all__ = ["answer_get", "health_probes", "receive_asgi", "receive_stream"]


def health_probes(inbox: BaseInbox) -> Readiness:
    """The answers of `GET /healthz` and `GET /readyz`, as `inbox.asgi()` gives them:
    `await probes.health()` and `await probes.readiness()` return a `Reply` (200, or 503 with
    `Retry-After` while the database does not take a write). Keep one per route: it asks the
    database at most once at a time, however often the probe is asked."""
    return Readiness(inbox._receiver)
