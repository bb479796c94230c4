"""The ASGI app: `POST /webhooks/{source}`, `GET /healthz`, `/readyz` and `/metrics`.

A thin shell around `Receiver`: it reads the body with a cap, has the receiver verify it on the
event loop, awaits the group committer's future for the insert (or, with group commit off or
for an inline source, stores it in a worker thread: storage is synchronous SQLAlchemy, shared
with `Inbox.receive` and the worker), and writes the reply. All decisions about status codes
live in the receiver.

The delivery path is a plain ASGI callable; everything else (probes, metrics, the 405s) goes to
a small Starlette app behind it. A profile of the ingest path showed Starlette's request,
middleware and response layers at about a fifth of the CPU per delivery, for nothing the
delivery path needs: it parses no form, sets no cookie, and handles its own errors.
"""

from __future__ import annotations

import asyncio
import json
import logging

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from hookinbox._errors import BodyTooLarge, StoreUnavailable
from hookinbox._receiver import BaseReceiver, Reply

log = logging.getLogger("hookinbox.http")


class ClientGone(Exception):
    """The client disconnected before sending its whole body."""


async def read_body(receive: Receive, declared: bytes | None, limit: int) -> bytes:
    """The request body, refusing (without buffering) anything over `limit` bytes."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
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


async def send_reply(send: Send, reply: Reply) -> None:
    body = json.dumps(reply.body, separators=(",", ":")).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(
            (name.encode("latin-1"), value.encode("latin-1"))
            for name, value in reply.headers.items()
        ),
    ]
    await send({"type": "http.response.start", "status": reply.status_code, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class WebhookApp:
    """`POST {path}/{source}` handled directly; any other request goes to `fallback`."""

    def __init__(self, receiver: BaseReceiver, path: str, fallback: ASGIApp) -> None:
        self.receiver = receiver
        self.prefix = path.rstrip("/") + "/"
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        source = self._source(scope)
        if source is None:
            await self.fallback(scope, receive, send)
            return
        try:
            reply = await self._deliver(scope, receive, source)
        except ClientGone:
            return  # nobody is left to answer
        except Exception:  # a bug in hookinbox: log it, answer without the traceback
            log.exception("unexpected error receiving a delivery")
            reply = Reply(500, {"status": "error", "error": "internal"})
        await send_reply(send, reply)

    def _source(self, scope: Scope) -> str | None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        if root and path.startswith(root):  # mounted under a prefix
            path = path[len(root) :]
        if not path.startswith(self.prefix):
            return None
        source = path[len(self.prefix) :]
        return source if source and "/" not in source else None

    async def _deliver(self, scope: Scope, receive: Receive, source: str) -> Reply:
        receiver = self.receiver
        if source not in receiver.sources:
            # Answer before reading: an unknown source gets no buffer at all.
            return receiver.receive(source, {}, b"")
        raw_headers: list[tuple[bytes, bytes]] = scope["headers"]
        declared = next((v for k, v in raw_headers if k == b"content-length"), None)
        try:
            body = await read_body(receive, declared, receiver.max_body_size)
        except BodyTooLarge:
            return receiver.reject_too_large(source)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers]
        # Verification is CPU work of tens of microseconds (an HMAC, a JSON parse): it runs on
        # the event loop, which costs less than a hop to a worker thread and back; sources
        # that call their provider to verify run in a thread.
        if receiver.sources[source].verifies_over_network:
            step = await anyio.to_thread.run_sync(receiver.verify, source, headers, body)
        else:
            step = receiver.verify(source, headers, body)
        if isinstance(step, Reply):
            return step
        committer = receiver.committer_for(step)
        if committer is None or not _on_asyncio():
            reply: Reply = await anyio.to_thread.run_sync(receiver.store_verified, step)
            return reply
        try:
            recorded = await asyncio.wrap_future(committer.submit(step.delivery))
        except Exception as error:
            return receiver.conclude(step, error)
        return receiver.conclude(step, recorded)


def _on_asyncio() -> bool:
    """Group commit's futures are awaited with asyncio; under another loop (trio), a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _respond(reply: Reply) -> Response:
    return JSONResponse(reply.body, reply.status_code, headers=reply.headers)


def create_app(receiver: BaseReceiver, *, path: str = "/webhooks") -> ASGIApp:
    """An ASGI app serving `receiver`; mount it under any prefix."""

    async def not_allowed(_request: Request) -> Response:
        return Response("Method Not Allowed", 405, headers={"Allow": "POST"})

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_request: Request) -> Response:
        try:
            await anyio.to_thread.run_sync(receiver.ping)
        except StoreUnavailable as error:
            return _respond(receiver.unavailable(error.message))
        return JSONResponse({"status": "ready"})

    async def metrics(_request: Request) -> Response:
        body, content_type = await anyio.to_thread.run_sync(receiver.metrics)
        return Response(body, media_type=content_type)

    methods = ["GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"]
    routes = [
        Route(f"{path.rstrip('/')}/{{source}}", not_allowed, methods=methods),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return WebhookApp(receiver, path, Starlette(routes=routes))
