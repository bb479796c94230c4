"""FastAPI (and Starlette): an `APIRouter` that receives deliveries, or one call per endpoint.

    app.include_router(hookinbox.fastapi.router(inbox))  # POST /webhooks/{source}

The router serves the inbox's probes beside it, `GET /webhooks/healthz` and `/webhooks/readyz`,
and `GET`/`HEAD /webhooks/{source}` for the sources whose provider shakes hands over them
(405 for the others).

The endpoint never declares a body parameter, so FastAPI neither reads nor parses the body:
hookinbox reads the raw bytes from the ASGI stream itself, with the inbox's size cap (413 from
Content-Length at once, or as soon as a chunked body passes the cap), and verifies them as
they came. The answers are those of `inbox.asgi()`, decided by the same code.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from fastapi import APIRouter, Request, Response

from hookinbox import BaseInbox, Reply, http
from hookinbox.http import health_probes

__all__ = ["handshake", "receive", "respond", "router"]

Answers = dict[int | str, dict[str, Any]]
"""OpenAPI's documented answers of a route, as FastAPI takes them."""

CLIENT_GONE = 400
"""The status of the answer nobody reads (the client left mid-body); servers log it."""


def router(
    inbox: BaseInbox,
    *,
    prefix: str = "/webhooks",
    tags: Sequence[str] = ("webhooks",),
    include_in_schema: bool = True,
) -> APIRouter:
    """A router with `POST {prefix}/{source}` for every source of `inbox`, and its probes
    beside it: `GET {prefix}/healthz` and `GET {prefix}/readyz`, answered as `inbox.asgi()`
    answers them (no source may take those two names)."""
    api = APIRouter(prefix=prefix.rstrip("/"), tags=list(tags))
    probes = health_probes(inbox)

    async def healthz() -> Response:
        return _response(await probes.health())

    async def readyz() -> Response:
        return _response(await probes.readiness())

    health_answers: Answers = {200: {"description": "the process runs"}}
    ready_answers: Answers = {
        200: {"description": "ready: deliveries can be stored"},
        503: {"description": "not ready; retry after Retry-After seconds"},
    }
    for path, endpoint, summary, answers in (
        ("/healthz", healthz, "Liveness: the process runs", health_answers),
        ("/readyz", readyz, "Readiness: the database takes a write", ready_answers),
    ):
        api.add_api_route(
            path, endpoint, methods=["GET"], include_in_schema=include_in_schema,
            summary=summary, response_class=Response, responses=answers,
        )  # fmt: skip
        # HEAD as `inbox.asgi()` answers it; a route of its own, out of the schema (FastAPI
        # gives a route of two methods one operation id, and warns of the duplicate).
        api.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)

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

    # After the probes: `/healthz` and `/readyz` are theirs, never a source's.
    api.add_api_route(
        "/{source}", partial(handshake, inbox), methods=["GET"],
        include_in_schema=include_in_schema, summary="Answer a provider's handshake",
        response_class=Response, responses=HANDSHAKE_ANSWERS,
    )  # fmt: skip
    api.add_api_route("/{source}", partial(handshake, inbox), methods=["HEAD"],
                      include_in_schema=False)  # fmt: skip
    # Event Grid's CloudEvents validation (405 for a source without one).
    api.add_api_route("/{source}", partial(_options, inbox), methods=["OPTIONS"],
                      include_in_schema=False)  # fmt: skip
    return api


HANDSHAKE_ANSWERS: Answers = {
    200: {"description": "the source's handshake answered (nothing stored)"},
    400: {"description": "not the provider's handshake (a missing or oversized challenge)"},
    403: {"description": "the handshake does not prove itself (a wrong verify token)"},
    405: {"description": "the source has no handshake over GET"},
}


async def handshake(inbox: BaseInbox, source: str, request: Request) -> Response:
    """A GET or HEAD on a source's path: its handshake (Meta's `hub.challenge`, X's CRC,
    ...), or 405. For a route of your own, as `respond` is for POST."""
    return _response(await inbox.ahandle(_request("GET", source, request)))


async def _options(inbox: BaseInbox, source: str, request: Request) -> Response:
    return _response(await inbox.ahandle(_request("OPTIONS", source, request)))


async def receive(inbox: BaseInbox, source: str, request: Request) -> Reply | None:
    """Read `request`'s raw body with the cap, verify and store it; None if the client left.

    For an endpoint of your own: it must not declare a body parameter (FastAPI would consume
    and parse the body before hookinbox could read the bytes).
    """
    return await inbox.ahandle(_request("POST", source, request))


async def respond(inbox: BaseInbox, source: str, request: Request) -> Response:
    """`receive`, answered as the provider expects: JSON body, status code and headers."""
    return _response(await receive(inbox, source, request))


def _request(method: str, source: str, request: Request) -> http.Request:
    """FastAPI's request as the pipeline takes it: the scope's raw headers and query string,
    and the ASGI `receive` the body is read from (nothing read or parsed before)."""
    scope = request.scope
    query: bytes = scope.get("query_string", b"")
    return http.Request(method, source, scope["headers"], query, request.receive)


def _response(reply: Reply | None) -> Response:
    if reply is None:  # the client left mid-body: nobody reads this answer
        return Response(status_code=CLIENT_GONE)
    return Response(
        reply.content, reply.status_code, headers=reply.headers, media_type=reply.media_type
    )
