"""The headers every dashboard answer carries, pages, redirects and errors alike."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; style-src 'self'; img-src 'self'; "
     b"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
]  # fmt: skip
"""No page may be framed (clickjacking a replay button), cached, or load anything foreign."""


class SecurityHeaders:
    """Wraps the dashboard's whole app, so no route can answer without the headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)
