"""What every handler of one dashboard shares: the operations service (what it asks of the
inbox's data) behind the dashboard's own cap, the sessions, the sources and thresholds it
shows, and its two kinds of answer (a page, a redirect)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio.to_thread
from anyio import CapacityLimiter
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from hookinbox._operations import Thresholds
from hookinbox._operations._service import Operations
from hookinbox.dashboard._auth import Session, Sessions, mount_path
from hookinbox.dashboard._templates import render

T = TypeVar("T")

OPERATOR_CONCURRENCY = 2
"""Database operations the dashboard runs at once; the rest wait their turn on the event loop.

The dashboard shares the inbox's connection pool when `serve` mounts it: capped, operator
work can hold at most this many of the pool's connections (and threads), whatever the number
of operators or requests, so ingest and the probes always find one (issue 19)."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Dashboard:
    def __init__(
        self, operations: Operations, token: str, sources: Sequence[str], thresholds: Thresholds
    ) -> None:
        self.operations = operations
        self.sessions = Sessions(token)
        self.sources = list(sources)
        self.thresholds = thresholds
        self.limiter = CapacityLimiter(OPERATOR_CONCURRENCY)

    async def off_loop(self, function: Callable[..., T], *args: Any) -> T:
        """Operations are synchronous SQLAlchemy: each runs in a worker thread, off the event
        loop, within the dashboard's own cap (`OPERATOR_CONCURRENCY`)."""
        return await anyio.to_thread.run_sync(function, *args, limiter=self.limiter)

    def render(
        self,
        request: Request,
        name: str,
        session: Session | None,
        status_code: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        return render(request, name, session, status_code, known_sources=self.sources, **context)

    def redirect(self, request: Request, path: str) -> RedirectResponse:
        return RedirectResponse(mount_path(request) + path, 303)
