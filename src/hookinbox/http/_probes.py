"""Everything the ASGI app serves beside deliveries: `GET /healthz`, `/readyz`, `/metrics`,
the ASGI lifespan, and (when given) the dashboard at `/admin`.

Plain ASGI, like the delivery path: the core install has no web framework, and three fixed
GET routes do not need one. The dashboard is a Starlette app (the `[dashboard]` extra), and
is mounted with Starlette's own `Mount` only when it is served, so its redirects and sub-paths
behave as Starlette's routing makes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import anyio.to_thread

from hookinbox._errors import ConfigurationError, MissingExtra, StoreUnavailable
from hookinbox._metrics import METRICS_MISSING_STATUS
from hookinbox._receiver import BaseReceiver, Reply
from hookinbox.http._types import ASGIApp, Receive, Scope, Send

ReceiverSource = Callable[[], BaseReceiver]
"""Where the app finds its receiver when first needed: an inbox starts when first used."""

ADMIN_PATH = "/admin"
PROBES = frozenset({"healthz", "readyz", "metrics"})
"""Paths of the probes, never taken for a source name under a mount point."""

READY_WAIT = 3.0
"""How long `/readyz` waits for the database when the inbox has no ack deadline."""


HEALTHY = Reply(200, {"status": "ok"})
READY = Reply(200, {"status": "ready"})


class Readiness:
    """The answers of `/healthz` and `/readyz`, for every adapter that serves them (the ASGI
    app below, `hookinbox.fastapi.router`): one decision, whatever serves the route."""

    def __init__(self, receiver: ReceiverSource) -> None:
        self.receiver = receiver
        self._ping: asyncio.Future[None] | None = None

    async def health(self) -> Reply:
        """200 while the process runs: it asks nothing of the inbox or the database."""
        return HEALTHY

    async def readiness(self) -> Reply:
        """200 when the database takes a write within the ack deadline, else 503."""
        try:
            receiver = self.receiver()
        except ConfigurationError as error:  # never ready: the inbox cannot start
            return Reply(503, {"status": "not ready", "detail": str(error)})
        wait = receiver.ack_deadline or READY_WAIT
        try:
            await asyncio.wait_for(asyncio.shield(self._pinged(receiver)), wait)
        except StoreUnavailable as error:
            return receiver.unavailable(error.message)
        except TimeoutError:
            return receiver.unavailable(f"database did not answer within {wait:g} s")
        return READY

    def _pinged(self, receiver: BaseReceiver) -> asyncio.Future[None]:
        """The database ping in flight, or a new one: one at a time, however often the probe
        is asked. A database that went silent (a lost host: no reset, no answer) holds a ping
        until the connection's TCP timeout; without this, a load balancer probing every half
        second would pile up a thread per probe meanwhile."""
        if self._ping is None or self._ping.done():
            loop = asyncio.get_running_loop()
            self._ping = loop.run_in_executor(None, receiver.ping)
        return self._ping


class Ready(Protocol):
    """What `health_probes` needs of an inbox (every `BaseInbox` is one): naming this rather
    than the inbox keeps the HTTP layer below the facade, types included."""

    async def readiness(self) -> Reply:
        """The answer of `GET /readyz`."""
        ...


class HealthProbes:
    """`hookinbox.http.health_probes(inbox)`: the same answers, readiness asked of the inbox's
    public `readiness()` (an adapter reads no private member of the inbox)."""

    def __init__(self, inbox: Ready) -> None:
        self._inbox = inbox

    async def health(self) -> Reply:
        """200 while the process runs: it asks nothing of the inbox or the database."""
        return HEALTHY

    async def readiness(self) -> Reply:
        """200 when the database takes a write within the ack deadline, else 503."""
        return await self._inbox.readiness()


class Probes:
    """The app behind the delivery path: probes, lifespan, the dashboard, else 404."""

    def __init__(self, receiver: ReceiverSource, admin: ASGIApp | None = None) -> None:
        self.receiver = receiver
        self.readiness = Readiness(receiver)
        self.admin: ASGIApp | None = None
        if admin is not None:
            from starlette.applications import Starlette
            from starlette.routing import Mount

            self.admin = Starlette(routes=[Mount(ADMIN_PATH, app=admin)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            probe = route_path(scope).removeprefix("/")
            if probe in PROBES:
                await self._probe(probe, scope, send)
                return
        if scope["type"] == "lifespan":
            await lifespan(self.receiver, receive, send)
        elif self.admin is not None:  # it answers /admin and 404 as Starlette does
            await self.admin(scope, receive, send)
        elif scope["type"] == "http":
            await send_text(send, 404, "Not Found")
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def _probe(self, probe: str, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send_text(send, 405, "Method Not Allowed", allow="GET, HEAD")
        elif probe == "healthz":
            await send_reply(send, await self.readiness.health())
        elif probe == "readyz":
            await send_reply(send, await self.readiness.readiness())
        else:
            try:
                body, content_type = await anyio.to_thread.run_sync(self.receiver().metrics)
            except MissingExtra as error:  # one line naming the extra, not a 500
                await send_text(send, METRICS_MISSING_STATUS, f"{error}\n")
                return
            await send_body(send, 200, body, content_type)


def route_path(scope: Scope) -> str:
    """The path below the app's mount point (its `root_path`), as Starlette computes it."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def lifespan(receiver: ReceiverSource, receive: Receive, send: Send) -> None:
    """Start the inbox when the server starts, so that a configuration mistake stops the
    server with its one-line message instead of failing each delivery; nothing to stop."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            try:
                receiver()
            except ConfigurationError as error:
                await send({"type": "lifespan.startup.failed", "message": str(error)})
                return
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def send_body(
    send: Send, status: int, body: bytes, content_type: str, **headers: str
) -> None:
    raw = [
        (b"content-type", content_type.encode("latin-1")),
        (b"content-length", b"%d" % len(body)),
    ]
    if headers:  # most answers have none: no generator to build for them
        raw += [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
        ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_reply(send: Send, reply: Reply) -> None:
    await send_body(send, reply.status_code, reply.content, reply.media_type, **reply.headers)


async def send_text(send: Send, status: int, text: str, **headers: str) -> None:
    await send_body(send, status, text.encode(), "text/plain; charset=utf-8", **headers)
