"""A NATS JetStream destination: each message published once per key within the stream's window.

The stream, not the relay, makes a redelivery harmless: every message carries the outbox key as
`Nats-Msg-Id`, and JetStream drops a second message with an id it has seen within the stream's
duplicate window (two minutes by default), answering its PubAck with `duplicate: true`. The relay
counts a publish as delivered only once the stream's PubAck came back (the message is stored),
and publishes one message per call, so the relay's per-key order is the stream's order.

nats-py is async only. Both relays run this destination: the thread worker's (`hookinbox
worker`, `hookinbox relay`) calls `deliver`, the async worker's awaits `adeliver`; either hands
the publish to one event loop kept running in a thread of the destination's own, holding its
one connection. That loop keeps the connection alive between deliveries (the server's pings
answered, a lost connection redialled at once), where a loop run only during each delivery
would find it dropped by the server after an idle spell.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from hookinbox import _ranges as ranges
from hookinbox import _tracing as tracing
from hookinbox._errors import ConfigurationError
from hookinbox._extras import require
from hookinbox._logging import logger
from hookinbox._model import Message
from hookinbox._processing import RetryPolicy
from hookinbox.outbox._destinations import DeliveryError, Undeliverable

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js import JetStreamContext

log = logger("hookinbox.relay")

SCHEMES = frozenset({"nats", "tls", "ws", "wss"})
RECONNECT_WAIT = 0.5
"""Seconds between redials after a lost connection (nats-py's default is 2)."""


@dataclass
class JetStreamDestination:
    """Publish the payload as JSON to a JetStream `subject`, with `Nats-Msg-Id: <message key>`.

    A PubAck (a `duplicate` one too): delivered. No stream takes the subject, no PubAck within
    `timeout`, a lost connection, a JetStream error: retried. A payload over the server's
    `max_payload`: `Undeliverable`.
    """

    name: str
    url: str
    subject: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    retry: RetryPolicy | None = None
    _loop: _LoopThread | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        require("JetStreamDestination", "nats")
        ranges.DESTINATION_TIMEOUT.check("timeout", self.timeout)
        _check_servers(self.url)
        _check_subject(self.subject)
        for header, value in self.headers.items():
            if header.lower() == "nats-msg-id":
                raise ConfigurationError("Nats-Msg-Id is the message key; it cannot be set")
            if "\r" in f"{header}{value}" or "\n" in f"{header}{value}":
                raise ConfigurationError(f"header {header!r} has a line break")

    @property
    def servers(self) -> list[str]:
        return [server.strip() for server in self.url.split(",")]

    def deliver(self, message: Message) -> None:
        """On the thread worker's relay: waits for the publish on the destination's loop."""
        self._running().run(message).result()

    async def adeliver(self, message: Message) -> None:
        """On the async worker's relay: awaits the publish on the destination's loop."""
        await asyncio.wrap_future(self._running().run(message))

    def _running(self) -> _LoopThread:
        with self._lock:
            if self._loop is None or not self._loop.alive:
                self._loop = _LoopThread(_Link(self))
            return self._loop

    def close(self) -> None:
        """Close the connection and stop the destination's loop thread."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and loop.alive:
            loop.stop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def body(self, message: Message) -> bytes:
        return json.dumps(message.payload, ensure_ascii=False, separators=(",", ":")).encode()


class _LoopThread:
    """An event loop in a daemon thread, holding the destination's one connection.

    Both relays publish here: the connection outlives each delivery and each event loop of the
    async worker (a connection left on a loop that ended would leak its socket).
    """

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.loop = asyncio.new_event_loop()
        self.pid = os.getpid()  # a forked child inherits the loop but not its thread
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="hookinbox-jetstream", daemon=True
        )
        self.thread.start()

    @property
    def alive(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive() and not self.loop.is_closed()

    def run(self, message: Message) -> concurrent.futures.Future[None]:
        return asyncio.run_coroutine_threadsafe(self.link.publish(message), self.loop)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.link.close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


class _Link:
    """One NATS connection on one event loop: dialled at first use, redialled by nats-py after
    a loss, dialled anew if it ended closed."""

    def __init__(self, destination: JetStreamDestination) -> None:
        self.destination = destination
        self.client: Client | None = None
        self.jetstream: JetStreamContext | None = None
        self.dialling = asyncio.Lock()
        self.closing = False

    async def connected(self) -> JetStreamContext:
        async with self.dialling:  # concurrent first deliveries dial once
            if self.client is None or self.client.is_closed or self.jetstream is None:
                self.client = await self._dial()
                self.jetstream = self.client.jetstream(timeout=self.destination.timeout)
        if not self.client.is_connected:
            # Reconnecting: a publish now would wait in nats-py's buffer and go out later,
            # maybe after the retry it provoked; refuse it, the relay retries with backoff.
            raise DeliveryError(f"NATS at {self._where()}: connection lost, reconnecting")
        return self.jetstream

    async def _dial(self) -> Client:
        import nats.aio.client

        destination = self.destination
        where = self._where()
        dialled = False

        async def disconnected() -> None:
            if dialled and not self.closing:  # a failed dial or `close` says so otherwise
                log.warning("NATS at %s: disconnected; reconnecting", where)

        async def reconnected() -> None:
            log.warning("NATS at %s: reconnected", where)

        async def error(error: Exception) -> None:
            # Each failed redial reports here; `disconnected` has said it once already.
            log.debug("NATS at %s: %s", where, error)

        client = nats.aio.client.Client()
        try:
            # A first dial gives up after two tries (a DeliveryError, retried by the relay with
            # backoff); nats-py would otherwise loop forever on a server that is down.
            await asyncio.wait_for(
                client.connect(
                    destination.servers,
                    name="hookinbox relay",
                    connect_timeout=max(1, round(destination.timeout)),
                    allow_reconnect=True,
                    max_reconnect_attempts=1,
                    reconnect_time_wait=RECONNECT_WAIT,  # type: ignore[arg-type]  # a float works
                    disconnected_cb=disconnected,
                    reconnected_cb=reconnected,
                    error_cb=error,
                ),
                destination.timeout,
            )
        except Exception as failure:  # refused, unreachable, TLS, auth: tried again later
            await client.close()
            raise DeliveryError(f"NATS at {where}: cannot connect: {_said(failure)}") from failure
        # Once connected, a lost connection is redialled for as long as the relay lives: read by
        # nats-py at each redial, so set here rather than at connect.
        client.options["max_reconnect_attempts"] = -1
        dialled = True
        return client

    def _where(self) -> str:
        # Host and port, never the URL: it may carry a user and password or a token.
        return ",".join(
            f"{parts.hostname}:{parts.port or 4222}"
            for parts in map(urlsplit, self.destination.servers)
        )

    async def publish(self, message: Message) -> None:
        import nats.errors
        import nats.js.errors

        destination = self.destination
        if "\r" in message.key or "\n" in message.key:
            raise Undeliverable(f"the key {message.key!r} cannot be a NATS header (a line break)")
        headers = {**destination.headers, "Nats-Msg-Id": message.key}
        tracing.inject_current(headers)  # traceparent: a consumer may continue the trace
        jetstream = await self.connected()
        subject = destination.subject
        try:
            ack = await jetstream.publish(
                subject, destination.body(message), timeout=destination.timeout, headers=headers
            )
        except nats.js.errors.NoStreamResponseError as error:
            raise DeliveryError(
                f"no JetStream stream takes subject {subject!r} on NATS at {self._where()}"
                " (create one; the message is retried)"
            ) from error
        except nats.errors.MaxPayloadError as error:
            raise Undeliverable(f"larger than the NATS server's max_payload: {error}") from error
        except nats.errors.TimeoutError as error:
            raise DeliveryError(
                f"no PubAck for subject {subject!r} within {destination.timeout:g} s"
            ) from error
        except (nats.errors.Error, OSError) as error:  # connection closed or reset, API errors
            raise DeliveryError(f"NATS at {self._where()}: {_said(error)}") from error
        tracing.annotate_current({
            "messaging.system": "nats",
            "messaging.destination.name": subject,
            "hookinbox.jetstream.stream": ack.stream,
            "hookinbox.jetstream.sequence": ack.seq,
            "hookinbox.jetstream.duplicate": bool(ack.duplicate),
        })  # fmt: skip

    async def close(self) -> None:
        self.closing = True
        client, self.client = self.client, None
        if client is not None and not client.is_closed:
            await client.close()


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".rstrip(": ")


def _check_servers(url: object) -> None:
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(f"url must be a NATS server URL (nats://host:4222), not {url!r}")
    for server in url.split(","):
        try:
            parts = urlsplit(server.strip())
            parts.port  # noqa: B018  # raises on a port that is not a number
        except ValueError as error:
            raise ConfigurationError(f"url {server.strip()!r} is not a URL: {error}") from None
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ConfigurationError(
                f"url must be nats://host:port (or tls://, ws://, wss://), not {server.strip()!r}"
            )


def _check_subject(subject: object) -> None:
    """A subject a message can be published to: dot-separated tokens, no wildcard, no space."""
    if not isinstance(subject, str) or not subject:
        raise ConfigurationError(
            f"subject must be a NATS subject (orders.shipped), not {subject!r}"
        )
    tokens = subject.split(".")
    if any(not token or token in ("*", ">") for token in tokens) or any(
        character.isspace() for character in subject
    ):
        raise ConfigurationError(
            f"subject must be dot-separated tokens without wildcards or spaces, not {subject!r}"
        )
