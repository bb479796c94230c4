"""HTTP: what a framework adapter is built on.

An adapter translates, and decides nothing: it makes a `Request` of its framework's request
(method, source name, headers, query string, and the body unread: an ASGI `receive`, or a
stream's `read`), hands it to the inbox, and sends back the `Reply`:

    reply = await inbox.ahandle(Request(method, source, scope["headers"], query, receive))  # ASGI
    reply = inbox.handle(Request(method, source, headers, query, stream.read, content_length))

    respond(reply.status_code, reply.headers, reply.content, reply.media_type)

The pipeline below reads the body with the inbox's cap, verifies, stores, answers handshakes
and chooses every status code. `receive_asgi`, `receive_stream` and `answer_get` are the same
calls for a POST or a GET. `inbox.asgi()` is the complete ASGI app (deliveries, probes,
metrics); an adapter that serves the probes too answers them with `health_probes(inbox)`.
"""

from __future__ import annotations

from hookinbox._receiver import Request
from hookinbox.http._app import receive_asgi
from hookinbox.http._blocking import answer_get, receive_stream
from hookinbox.http._probes import HealthProbes, Ready

__all__ = ["Request", "answer_get", "health_probes", "receive_asgi", "receive_stream"]


def health_probes(inbox: Ready) -> HealthProbes:
    """The answers of `GET /healthz` and `GET /readyz`, as `inbox.asgi()` gives them:
    `await probes.health()` and `await probes.readiness()` return a `Reply` (200, or 503 with
    `Retry-After` while the database does not take a write: `inbox.readiness()`, which asks
    the database at most once at a time, however often the probe is asked)."""
    return HealthProbes(inbox)
