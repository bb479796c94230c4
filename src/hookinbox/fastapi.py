"""FastAPI (and Starlette): an `APIRouter` that receives deliveries, or one call per endpoint.

    app.include_router(hookinbox.fastapi.router(inbox))         # POST /webhooks/{source}

The endpoint never declares a body parameter, so FastAPI neither reads nor parses the body:
hookinbox reads the raw bytes from the ASGI stream itself, with the inbox's size cap (413 from
Content-Length at once, or as soon as a chunked body passes the cap), and verifies them as
they came. The answers are those of `inbox.asgi()`, decided by the same code.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Request, Response

from hookinbox import BaseInbox, Reply
from hookinbox.http import receive_asgi

__all__ = ["receive", "respond", "router"]

CLIENT_GONE = 400
"""The status of the answer nobody reads (the client left mid-body); servers log it."""


def router(
    inbox: BaseInbox,
    *,
    prefix: str = "/webhooks",
    tags: Sequence[str] = ("webhooks",),
    include_in_schema: bool = True,
) -> APIRouter:
    """A router with `POST {prefix}/{source}` for every source of `inbox`."""
    api = APIRouter(prefix=prefix.rstrip("/"), tags=list(tags))

    @api.post(
        "/{source}",
        include_in_schema=include_in_schema,
        summary="Receive a webhook delivery",
        response_class=Response,
        responses={
            200: {"description": "stored (accepted) or already stored (duplicate)"},
            400: {"description": "authentic, but no event in the body"},
            401: {"description": "signature missing, wrong or out of tolerance"},
            404: {"description": "no such source"},
            413: {"description": "body over the inbox's max_body_size"},
            503: {"description": "not stored; retry after Retry-After seconds"},
        },
    )
    async def receive_webhook(source: str, request: Request) -> Response:
        return await respond(inbox, source, request)

    return api


async def receive(inbox: BaseInbox, source: str, request: Request) -> Reply | None:
    """Read `request`'s raw body with the cap, verify and store it; None if the client left.

    For an endpoint of your own: it must not declare a body parameter (FastAPI would consume
    and parse the body before hookinbox could read the bytes).
    """
    return await receive_asgi(inbox, source, request.headers.raw, request.receive)


async def respond(inbox: BaseInbox, source: str, request: Request) -> Response:
    """`receive`, answered as the provider expects: JSON body, status code and headers."""
    reply = await receive(inbox, source, request)
    if reply is None:
        return Response(status_code=CLIENT_GONE)
    return Response(
        reply.content, reply.status_code, headers=reply.headers, media_type=reply.media_type
    )
