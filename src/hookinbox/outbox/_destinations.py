"""Destinations: where outbox messages go. A Python callable, or HTTP with an Idempotency-Key.

A destination delivers one message or raises:
- `DeliveryError` (or any exception): try again later, with backoff; `retry_after` if known;
- `Undeliverable`: the receiver refused it for good (a 4xx other than 408/409/425/429); the
  message is `failed` at once and waits for an operator.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hookinbox import _ranges as ranges
from hookinbox import _tracing as tracing
from hookinbox._errors import HookinboxError
from hookinbox._extras import require
from hookinbox._model import Message
from hookinbox._processing import RetryPolicy, is_async_function

if TYPE_CHECKING:
    import httpx

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})
"""4xx answers that mean "not now" rather than "never" (plus every 5xx)."""


class DeliveryError(HookinboxError):
    """The message could not be delivered this time; it will be retried."""

    def __init__(self, message: str | None = None, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Undeliverable(HookinboxError):
    """The receiver refused the message for good; it will not be retried."""


@runtime_checkable
class Destination(Protocol):
    name: str
    retry: RetryPolicy | None

    def deliver(self, message: Message) -> None: ...


@runtime_checkable
class AsyncDestination(Destination, Protocol):
    """A destination that can also deliver on an event loop (the async worker's relay awaits
    `adeliver`; a destination without it is called in a thread there)."""

    async def adeliver(self, message: Message) -> None: ...


_loops = threading.local()


def _run(awaitable: Awaitable[Any]) -> Any:
    loop = getattr(_loops, "loop", None)
    if loop is None or loop.is_closed():
        loop = _loops.loop = asyncio.new_event_loop()
    return loop.run_until_complete(awaitable)


@dataclass
class CallableDestination:
    """`@inbox.destination("email")`: a function taking the `Message`, sync or async."""

    name: str
    function: Callable[[Message], Any]
    retry: RetryPolicy | None = None

    def deliver(self, message: Message) -> None:
        result = self.function(message)
        if inspect.isawaitable(result):
            _run(result)

    async def adeliver(self, message: Message) -> None:
        """On the async worker: an `async def` function is awaited on its loop; a plain one
        runs in a thread, outside the loop (it may block: an SMTP client, a sync SDK)."""
        if is_async_function(self.function):
            await self.function(message)
            return
        result = await asyncio.to_thread(self.function, message)
        if inspect.isawaitable(result):
            await result


@dataclass
class HTTPDestination:
    """POST the payload as JSON, with the message key as `Idempotency-Key`.

    2xx: delivered. 408, 409, 425, 429, 5xx, timeouts and connection errors: retried, after
    `Retry-After` when the receiver sends one. Any other status: `Undeliverable`.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    retry: RetryPolicy | None = None
    _client: httpx.Client | None = field(default=None, init=False, repr=False)
    _async_client: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # When the destination is declared, not at its first delivery in the relay.
        require("HTTPDestination", "http")
        # A `nan` timeout failed every delivery in the socket, retried until failed.
        ranges.DESTINATION_TIMEOUT.check("timeout", self.timeout)

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            import httpx  # imported by the relay when it first delivers, not by every command

            self._client = httpx.Client(timeout=self.timeout)
        return self._client

    def deliver(self, message: Message) -> None:
        import httpx

        try:
            response = self.client.post(
                self.url, json=message.payload, headers=self._headers(message)
            )
        except httpx.TransportError as error:  # connection refused or reset, timeouts
            raise DeliveryError(f"{type(error).__name__}: {error}") from error
        self._conclude(response)

    async def adeliver(self, message: Message) -> None:
        """`deliver` on httpx's async client (the async worker's relay)."""
        import httpx

        if self._async_client is None:
            self._async_client = httpx.AsyncClient(timeout=self.timeout)
        try:
            response = await self._async_client.post(
                self.url, json=message.payload, headers=self._headers(message)
            )
        except httpx.TransportError as error:  # connection refused or reset, timeouts
            raise DeliveryError(f"{type(error).__name__}: {error}") from error
        self._conclude(response)

    def _headers(self, message: Message) -> dict[str, str]:
        headers = {**self.headers, "Idempotency-Key": message.key}
        tracing.inject_current(headers)  # traceparent: the receiver may continue the trace
        return headers

    def _conclude(self, response: httpx.Response) -> None:
        status = response.status_code
        # Host and port, never the URL: its path or query may carry a token.
        tracing.annotate_current({
            "http.request.method": "POST",
            "server.address": response.request.url.host,
            "server.port": response.request.url.port or 443,
            "http.response.status_code": status,
        })  # fmt: skip
        if 200 <= status < 300:
            return
        detail = f"{self.url} answered {status}"
        if status in RETRYABLE_STATUSES or status >= 500:
            raise DeliveryError(detail, retry_after=parse_retry_after(response.headers))
        raise Undeliverable(detail)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    async def aclose(self) -> None:
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None


RETRY_AFTER_CEILING = 366 * 86_400.0
"""The longest `Retry-After` read, in seconds; anything longer (or a date further away) reads as
this. The relay then clamps it to its policy's `max_delay`."""


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds from a `Retry-After` header: delta-seconds or an HTTP date; None if absent/bad.

    The header comes from a server we do not control: a value of any length or form gives a
    finite number in [0, RETRY_AFTER_CEILING] or None, never an exception.
    """
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        # A long digit string overflows a float (or int() refuses it): it only means "far".
        return RETRY_AFTER_CEILING if len(value) > 9 else min(float(value), RETRY_AFTER_CEILING)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": a time in UTC whose zone is not known locally
        when = when.replace(tzinfo=UTC)
    seconds = when.timestamp() - (time.time() if now is None else now)
    return min(max(0.0, seconds), RETRY_AFTER_CEILING)
