"""The ASGI app: `POST /webhooks/{source}`, `GET /healthz`, `/readyz` and `/metrics`.

A thin shell around `Receiver`: it reads the body with a cap, hands it to the receiver in a
worker thread (storage is synchronous SQLAlchemy, shared with `Inbox.receive` and the worker),
and writes the reply. All decisions about status codes live in the receiver.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hookinbox._errors import BodyTooLarge, StoreUnavailable
from hookinbox._metrics import exposition
from hookinbox._receiver import Receiver, Reply


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (without buffering) anything over `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


def _respond(reply: Reply) -> Response:
    return JSONResponse(reply.body, reply.status_code, headers=reply.headers)


def create_app(receiver: Receiver, *, path: str = "/webhooks") -> Starlette:
    """An ASGI app serving `receiver`; mount it under any prefix."""

    async def webhook(request: Request) -> Response:
        source_name: str = request.path_params["source"]
        if source_name not in receiver.sources:
            # Answer before reading: an unknown source gets no buffer at all.
            return _respond(receiver.receive(source_name, {}, b""))
        try:
            body = await read_body(request, receiver.max_body_size)
        except BodyTooLarge:
            return _respond(receiver.reject_too_large(source_name))
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it
        headers = request.headers.items()
        reply = await anyio.to_thread.run_sync(receiver.receive, source_name, headers, body)
        return _respond(reply)

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(_request: Request) -> Response:
        try:
            await anyio.to_thread.run_sync(receiver.store.ping)
        except StoreUnavailable as error:
            return _respond(receiver.unavailable(error.message))
        return JSONResponse({"status": "ready"})

    async def metrics(_request: Request) -> Response:
        body, content_type = await anyio.to_thread.run_sync(exposition, receiver.store)
        return Response(body, media_type=content_type)

    routes = [
        Route(f"{path.rstrip('/')}/{{source}}", webhook, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes)
