"""The ASGI app: `POST /webhooks/{source}`, `GET /healthz`, `/readyz` and `/metrics`.

`GET` and `HEAD /webhooks/{source}` are a source's handshake where its provider sends one
(`Source.answer_get`), 405 otherwise; no body is read for them.

A thin shell around `Receiver`: it reads the body with a cap, has the receiver verify it on the
event loop, awaits the group committer's future for the insert (or, with group commit off or
for an inline source, stores it in a worker thread: storage is synchronous SQLAlchemy, shared
with `Inbox.receive` and the worker), and writes the reply. All decisions about status codes
live in the receiver.

The whole app is plain ASGI, with no web framework: a profile of the ingest path showed
Starlette's request, middleware and response layers at about a fifth of the CPU per delivery,
for nothing the delivery path needs (it parses no form, sets no cookie, and handles its own
errors), and the core install carries no framework. Only the dashboard, a Starlette app of
its own (the `dashboard` extra), is mounted at `/admin` when it is served.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

import anyio.to_thread

from hookinbox._errors import BodyTooLarge, ConfigurationError
from hookinbox._headers import HeaderValues, normalize_raw_headers
from hookinbox._logging import logger
from hookinbox._receiver import BaseReceiver, Reply, Verified
from hookinbox.http._deadlines import within
from hookinbox.http._probes import PROBES, Probes, ReceiverSource, send_reply
from hookinbox.http._types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from hookinbox._inbox import BaseInbox

INTERNAL_ERROR = Reply(500, {"status": "error", "error": "internal"})

NETWORK_VERIFICATIONS = 8
"""Deliveries of one source verified over the network at once, per process (PayPal's API or
certificates, Mollie's API): each holds a worker thread until the provider answers. The rest
wait on the event loop, holding no thread, for at most the ack deadline (then 503), so a
provider slow to answer, or a flood of forged deliveries it must judge, never takes the
worker threads that other work shares (`/metrics`, storing without group commit, the
dashboard): anyio has 40 of them, and without this bound 40 such deliveries took them all."""

_network_limiters: WeakKeyDictionary[BaseReceiver, dict[str, anyio.CapacityLimiter]] = (
    WeakKeyDictionary()
)

log = logger("hookinbox.http")


class ClientGone(Exception):
    """The client disconnected before sending its whole body."""


class BodyTimeout(Exception):
    """The client did not send its whole body within the receiver's `body_timeout`."""


def receive_within(receive: Receive, seconds: float) -> Receive:
    """`receive`, raising `BodyTimeout` once `seconds` have passed since this call.

    One deadline for the whole body, not one per message: a client trickling a byte a second
    never waits long for any one message, and would hold its connection for ever.
    """
    deadline = anyio.current_time() + seconds

    async def receive_before_deadline() -> Message:
        with anyio.CancelScope(deadline=deadline):
            return await receive()
        raise BodyTimeout()

    return receive_before_deadline


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


async def receive_asgi(
    inbox: BaseInbox,
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
    return await answer(inbox._receiver(), source, headers, receive, query)


async def answer(
    receiver: BaseReceiver,
    source: str,
    raw_headers: list[tuple[bytes, bytes]],
    receive: Receive,
    query: bytes = b"",
) -> Reply | None:
    """Read one delivery from an ASGI `receive` and decide its reply; None if the client left.

    The raw ASGI app and the FastAPI router both answer through here.
    """
    try:
        return await _deliver(receiver, source, raw_headers, receive, query)
    except ClientGone:
        return None  # nobody is left to answer
    except BodyTimeout:
        return receiver.reject_slow_body(source)
    except Exception:  # a bug in hookinbox: log it, answer without the traceback
        log.exception("unexpected error receiving a delivery")
        return INTERNAL_ERROR


async def _deliver(
    receiver: BaseReceiver,
    source: str,
    raw_headers: list[tuple[bytes, bytes]],
    receive: Receive,
    query: bytes,
) -> Reply:
    if source not in receiver.sources:
        # Answer before reading: an unknown source gets no buffer at all.
        return receiver.receive(source, {}, b"")
    declared = next((v for k, v in raw_headers if k == b"content-length"), None)
    on_asyncio = _on_asyncio()
    try:
        body = await _read_in_time(receive, declared, receiver, on_asyncio)
    except BodyTooLarge:
        return receiver.reject_too_large(source)
    headers = normalize_raw_headers(raw_headers)
    # Verification is CPU work of tens of microseconds (an HMAC, a JSON parse): it runs on
    # the event loop, which costs less than a hop to a worker thread and back; sources
    # that call their provider to verify run in a thread of their own bounded pool.
    if receiver.sources[source].verifies_over_network:
        step = await _verify_over_network(receiver, source, headers, body, query)
    else:
        step = receiver.verify(source, headers, body, query=query)
    if isinstance(step, Reply):
        return step
    # Past the ack deadline the answer is 503, whatever storing is doing (a held lock, a
    # stalled disk): a provider that waits longer than it allows counts a failure anyway.
    time_left = receiver.time_left(step)
    committer = receiver.committer_for(step)
    if committer is None or not on_asyncio:
        with anyio.move_on_after(time_left):
            # Abandoned at the deadline, the thread goes on: its transaction commits or rolls
            # back whole, and `finish_verified` logs what became of it.
            reply: Reply = await anyio.to_thread.run_sync(
                receiver.store_verified, step, abandon_on_cancel=True
            )
            return reply
        return receiver.past_deadline(step)
    # A result, or a batched delivery's list of them, resolved on this loop.
    # `late`: a write that a writer took before the deadline ends after the 503 went out,
    # and the log says how (docs/ingest.md).
    late = partial(receiver.conclude_late, step)
    future = committer.submit_async(step.batch or step.delivery, late=late)
    try:
        # At the deadline the timeout cancels `future`: the committer drops the delivery
        # unless a writer has taken it already.
        async with within(time_left):
            recorded = await future
    except TimeoutError:
        return receiver.past_deadline(step)
    except Exception as error:
        return receiver.conclude(step, error)
    return receiver.conclude(step, recorded)


async def _verify_over_network(
    receiver: BaseReceiver, source: str, headers: HeaderValues, body: bytes, query: bytes
) -> Reply | Verified:
    """`receiver.verify` in a worker thread, at most `NETWORK_VERIFICATIONS` of the source's
    at once; a delivery that finds no free slot within the ack deadline is answered 503."""
    per_source = _network_limiters.setdefault(receiver, {})
    limiter = per_source.get(source)
    if limiter is None:
        limiter = per_source[source] = anyio.CapacityLimiter(NETWORK_VERIFICATIONS)
    started = anyio.current_time()
    # Only the wait for a slot can be cancelled: once in its thread, the verification is
    # shielded and its answer is used, however long the provider took.
    with anyio.move_on_after(receiver.ack_deadline):
        verify = partial(receiver.verify, query=query)
        step: Reply | Verified = await anyio.to_thread.run_sync(
            verify, source, headers, body, limiter=limiter
        )
        return step
    detail = (
        f"{NETWORK_VERIFICATIONS} deliveries of this source are being verified with the "
        "provider; none finished within the ack deadline"
    )
    return receiver.reject_unavailable(source, detail, anyio.current_time() - started)


async def _read_in_time(
    receive: Receive, declared: bytes | None, receiver: BaseReceiver, on_asyncio: bool
) -> bytes:
    """The body within the receiver's `body_timeout`, or `BodyTimeout`.

    On asyncio, one deadline for the whole body, kept by the loop's shared timer (`within`);
    under another loop, anyio's cancel scope per message (`receive_within`), which costs
    several times more per request.
    """
    if not on_asyncio:
        bounded = receive_within(receive, receiver.body_timeout)
        return await read_body(bounded, declared, receiver.max_body_size)
    try:
        async with within(receiver.body_timeout):
            return await read_body(receive, declared, receiver.max_body_size)
    except TimeoutError:
        raise BodyTimeout() from None


def _on_asyncio() -> bool:
    """Group commit's futures are awaited with asyncio; under another loop (trio), a thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class WebhookApp:
    """Deliveries (`{path}/{source}`) handled directly; any other request goes to `fallback`."""

    def __init__(self, receiver: ReceiverSource, path: str, fallback: ASGIApp) -> None:
        self.receiver = receiver
        self.prefix = path.rstrip("/") + "/"
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        source = self._source(scope)
        if source is None:
            await self.fallback(scope, receive, send)
            return
        method = scope["method"]
        try:
            receiver = self.receiver()  # the first request starts the inbox
        except ConfigurationError as error:  # `hookinbox serve` refuses to start instead
            log.error("the inbox cannot start: %s", error)
            await send_reply(send, INTERNAL_ERROR)
            return
        query = scope.get("query_string", b"")
        if method != "POST":  # a handshake's GET or HEAD, or 405: no body to read
            if method in ("GET", "HEAD"):
                headers = normalize_raw_headers(scope["headers"])
                await send_reply(send, receiver.answer_get(source, headers, query))
            else:
                await send_reply(send, receiver.method_not_allowed(source))
            return
        reply = await answer(receiver, source, scope["headers"], receive, query)
        if reply is not None:
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
