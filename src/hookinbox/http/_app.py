"""The ASGI app: `POST /webhooks/{source}`, `GET /healthz`, `/readyz` and `/metrics`.

`GET` and `HEAD /webhooks/{source}` are a source's handshake where its provider sends one
(`Source.answer_get`), 405 otherwise; no body is read for them.

A thin shell around the pipeline: it finds the source's name in the path, hands the request to
`BaseReceiver.ahandle` as a `Request` (the scope's headers and query string, and `receive` for
the body), and sends the `Reply` back. Reading the body with its cap and deadline, verifying,
storing and every status code are the pipeline's (`hookinbox._receiver`).

The whole app is plain ASGI, with no web framework: a profile of the ingest path showed
Starlette's request, middleware and response layers at about a fifth of the CPU per delivery,
for nothing the delivery path needs (it parses no form, sets no cookie, and handles its own
errors), and the core install carries no framework. Only the dashboard, a Starlette app of
its own (the `dashboard` extra), is mounted at `/admin` when it is served.
"""

from __future__ import annotations

from hookinbox._errors import ConfigurationError
from hookinbox._logging import logger
from hookinbox._receiver import INTERNAL_ERROR, BaseReceiver, Pipeline, Reply, Request
from hookinbox.http._probes import PROBES, Probes, ReceiverSource, send_reply
from hookinbox.http._types import ASGIApp, Receive, Scope, Send

log = logger("hookinbox.http")


async def receive_asgi(
    inbox: Pipeline,
    source: str,
    headers: list[tuple[bytes, bytes]],
    receive: Receive,
    *,
    query: bytes = b"",
) -> Reply | None:
    """Read one delivery from an ASGI `receive` callable and decide its reply.

    For adapters of ASGI frameworks: `headers` are the scope's raw header pairs, `query` its
    `query_string` (read only by a source that `reads_query`). The body is read with the
    inbox's size cap and body timeout, verified exactly as it came, and stored within the ack
    deadline. None means the client left before its body arrived: nobody is left to answer.
    """
    return await inbox.ahandle(Request("POST", source, headers, query, receive))


class WebhookApp:
    """Deliveries (`{path}/{source}`) handled directly; any other request goes to `fallback`."""

    def __init__(self, receiver: ReceiverSource, path: str, fallback: ASGIApp) -> None:
        self.receiver = receiver
        # Kept once the inbox has started: it hands out the same receiver for its lifetime.
        self.started: BaseReceiver | None = None
        self.prefix = path.rstrip("/") + "/"
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        source = self._source(scope)
        if source is None:
            await self.fallback(scope, receive, send)
            return
        receiver = self.started
        if receiver is None:
            try:
                receiver = self.started = self.receiver()  # the first request starts the inbox
            except ConfigurationError as error:  # `hookinbox serve` refuses to start instead
                log.error("the inbox cannot start: %s", error)
                await send_reply(send, INTERNAL_ERROR)
                return
        request = Request(
            scope["method"], source, scope["headers"], scope.get("query_string", b""), receive
        )
        reply = await receiver.ahandle(request)
        if reply is not None:  # None: the client left before its body arrived
            await send_reply(send, reply)

    def _source(self, scope: Scope) -> str | None:
        if scope["type"] != "http":
            return None
        path: str = scope["path"]
        root: str = scope.get("root_path", "")
        mounted = bool(root) and path.startswith(root)
        if mounted:
            path = path[len(root) :]
        if path.startswith(self.prefix):
            source = path[len(self.prefix) :]
        elif mounted and path.startswith("/") and path[1:] not in PROBES:
            # The mount point may be the prefix itself: app.mount("/webhooks", inbox.asgi())
            # serves /webhooks/{source} (and /webhooks/webhooks/{source}, as before).
            source = path[1:]
        else:
            return None
        return source if source and "/" not in source else None


def create_app(
    receiver: ReceiverSource, *, path: str = "/webhooks", admin: ASGIApp | None = None
) -> ASGIApp:
    """An ASGI app serving the receiver `receiver()` returns; mount it under any prefix.

    The receiver is asked for at the server's lifespan startup, or at the first request when
    the app is mounted in another (whose lifespan does not reach it): an inbox starts when it
    is first used. `admin` (the dashboard) is served at `/admin`, beside the probes: only
    requests the delivery path did not take reach it, so `{path}/admin/...` never does (a
    source name has no slash), and `{path}/admin` is a delivery to a source named `admin`.
    """
    return WebhookApp(receiver, path, Probes(receiver, admin))
