"""A synchronous client for in-process ASGI tests, on httpx's ASGITransport."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
from starlette.types import ASGIApp


class ASGIClient:
    """Each call runs in its own event loop: tests stay plain functions."""

    def __init__(self, app: ASGIApp, base_url: str = "http://testserver") -> None:
        self.app = app
        self.base_url = base_url

    async def _send(self, method: str, url: str, kwargs: dict[str, Any]) -> httpx.Response:
        transport = httpx.ASGITransport(app=self.app)
        async with httpx.AsyncClient(transport=transport, base_url=self.base_url) as client:
            return await client.request(method, url, **kwargs)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return anyio.run(self._send, method, url, kwargs)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)
