"""Calling an ASGI app in process, with anyio (a core dependency): no server, no httpx."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from hookinbox.http._types import ASGIApp


@dataclass(frozen=True)
class Answer:
    """What the inbox answered one delivery over HTTP."""

    status_code: int
    content: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.content)

    @property
    def status(self) -> str | None:
        """The answer's `status` field: accepted, duplicate, rejected, ..."""
        try:
            body = self.json()
        except ValueError:
            return None
        return body.get("status") if isinstance(body, dict) else None

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


async def post(app: ASGIApp, path: str, headers: Mapping[str, str], body: bytes) -> Answer:
    """POST `body` to `path` as one HTTP/1.1 request; the app's answer."""
    raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw_headers.append((b"content-length", str(len(body)).encode()))
    raw_headers.append((b"host", b"testserver"))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "https",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": raw_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 443),
    }
    sent = False
    answered = anyio.Event()
    status = 500
    answer_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # the client stays connected until it has its answer
        return {"type": "http.disconnect"}

    async def send(message: Mapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", []):
                answer_headers[name.decode("latin-1").lower()] = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                answered.set()

    await app(scope, receive, send)
    return Answer(status, b"".join(chunks), answer_headers)
