"""RabbitMQ as an outbox destination: publisher confirms, persistent messages, mandatory routing.

Each message is published to `exchange` with `routing_key`, the outbox key as the AMQP
`message_id`, the payload as a JSON body, delivery mode 2 (persistent), and `mandatory` set:

- the broker confirms it (`basic.ack`): delivered;
- the broker returns it (routed to no queue): `Undeliverable`, the message is `failed`;
- a `basic.nack`, a lost connection or channel, no confirm within `timeout`: `DeliveryError`,
  retried (with the same `message_id`: a consumer de-duplicates by it, docs/brokers.md).

aio-pika (on aiormq) rather than pika: the async worker's relay awaits `adeliver` on its own
loop, and the sync relay's threads share one connection on the destination's own loop, so one
client serves both relays; pika's BlockingConnection is bound to one thread and has no asyncio
side. One message is published and its confirm awaited before `deliver` returns, so the
relay's one-at-a-time order per ordering key is the order in the broker.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hookinbox import _ranges as ranges
from hookinbox import _tracing as tracing
from hookinbox._errors import ConfigurationError
from hookinbox._extras import require
from hookinbox._model import Message
from hookinbox._processing import RetryPolicy
from hookinbox.outbox._destinations import DeliveryError, Undeliverable

if TYPE_CHECKING:
    import aio_pika.abc

SCHEMES = ("amqp", "amqps")
SHORTSTR = 255
"""AMQP's exchange names and routing keys are short strings: at most 255 bytes."""


@dataclass
class RabbitMQDestination:
    """Publish each message to a RabbitMQ exchange, confirmed, persistent, keyed by `message_id`.

    `exchange` "" is the default exchange, where `routing_key` is a queue's name. `headers` are
    added to each message's AMQP headers (with `traceparent` when a trace is active).
    """

    name: str
    url: str
    exchange: str = ""
    routing_key: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    retry: RetryPolicy | None = None
    _sync: _Link | None = field(default=None, init=False, repr=False)
    _async: _Link | None = field(default=None, init=False, repr=False)
    _runner: _LoopThread | None = field(default=None, init=False, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        require("RabbitMQDestination", "rabbitmq")
        ranges.DESTINATION_TIMEOUT.check("timeout", self.timeout)
        check_url(self.url)
        for what, value in (("exchange", self.exchange), ("routing_key", self.routing_key)):
            if not isinstance(value, str) or len(value.encode()) > SHORTSTR:
                raise ConfigurationError(f"RabbitMQDestination {what} must be a string of at "
                                         f"most {SHORTSTR} bytes, not {value!r}")  # fmt: skip
        if not self.exchange and not self.routing_key:
            raise ConfigurationError(
                "RabbitMQDestination needs a routing_key: on the default exchange it is the "
                "name of the queue the messages go to"
            )

    def deliver(self, message: Message) -> None:
        """The sync relay: published on the destination's own event loop (one thread, one
        connection, shared by the relay's threads); returns once the broker confirmed."""
        runner, link = self._sync_link()
        # The headers here, in the relay's thread: its span is current here, not on the loop.
        runner.run(link.publish(message, self._headers()))
        self._annotate()

    async def adeliver(self, message: Message) -> None:
        """The async worker's relay: published on its loop, over a connection of that loop."""
        loop = asyncio.get_running_loop()
        if self._async is None or self._async.loop is not loop:
            self._async = _Link(self, loop)
        await self._async.publish(message, self._headers())
        self._annotate()

    def _headers(self) -> dict[str, str]:
        headers = dict(self.headers)
        tracing.inject_current(headers)  # traceparent: the consumer may continue the trace
        return headers

    def _annotate(self) -> None:
        tracing.annotate_current({"messaging.rabbitmq.destination.routing_key": self.routing_key})

    def _sync_link(self) -> tuple[_LoopThread, _Link]:
        with self._guard:
            if self._runner is None or not self._runner.usable():
                # First delivery, or a forked child: the parent's thread and socket are not ours.
                self._runner = _LoopThread(f"hookinbox-rabbitmq-{self.name}")
                self._sync = _Link(self, self._runner.loop)
            assert self._sync is not None
            return self._runner, self._sync

    def close(self) -> None:
        """Close the sync relay's connection and stop its thread (after the relay stopped)."""
        with self._guard:
            runner, link, self._runner, self._sync = self._runner, self._sync, None, None
        if runner is not None and runner.usable():
            if link is not None:
                runner.run(link.drop())
            runner.stop()

    async def aclose(self) -> None:
        """Close the async relay's connection."""
        link, self._async = self._async, None
        if link is not None and link.loop is asyncio.get_running_loop():
            await link.drop()


def check_url(url: str) -> None:
    """A ConfigurationError naming the problem, for a URL aio-pika could not connect with."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except (TypeError, ValueError, AttributeError) as error:
        raise ConfigurationError(f"RabbitMQDestination url is not a URL: {error}") from error
    if parts.scheme not in SCHEMES:
        raise ConfigurationError(
            f"RabbitMQDestination url must start with amqp:// or amqps://, not {parts.scheme!r}"
            " (amqp://user:password@host:5672/vhost)"
        )
    if not parts.hostname:
        raise ConfigurationError("RabbitMQDestination url names no host")
    del port  # read only so that a port out of range or not a number is refused here


class _Link:
    """A connection and its confirming channel on one event loop: opened when first needed,
    dropped on any failure (the next delivery reconnects)."""

    def __init__(self, destination: RabbitMQDestination, loop: asyncio.AbstractEventLoop) -> None:
        self.destination = destination
        self.loop = loop
        self.connection: aio_pika.abc.AbstractConnection | None = None
        self.channel: aio_pika.abc.AbstractChannel | None = None
        self.exchange: aio_pika.abc.AbstractExchange | None = None
        self.opening: asyncio.Lock | None = None

    async def publish(self, message: Message, headers: dict[str, str]) -> None:
        import aio_pika
        import aiormq.exceptions

        d = self.destination
        body = json.dumps(message.payload, separators=(",", ":"), ensure_ascii=False).encode()
        amqp = aio_pika.Message(
            body,
            headers=dict(headers),  # a copy typed as AMQP field values (a str is one)
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=message.key,
        )
        broken: object = None
        try:
            exchange = await self.open()
            broken = self.connection  # what to drop if this publish fails: not a newer one
            await exchange.publish(amqp, d.routing_key, mandatory=True, timeout=d.timeout)
        except aiormq.exceptions.PublishError as error:  # before DeliveryError: its subclass
            raise Undeliverable(
                f"RabbitMQ returned it: exchange {d.exchange!r} routes {d.routing_key!r} to no "
                f"queue ({_reply(error)})"
            ) from error
        except aiormq.exceptions.DeliveryError as error:
            raise DeliveryError("RabbitMQ nacked it (not stored)") from error
        except TimeoutError as error:
            await self.drop(broken)  # the channel's state is unknown: start afresh
            raise DeliveryError(f"no answer from RabbitMQ within {d.timeout:g} s") from error
        except Exception as error:  # a lost connection or channel, a refused login: anew
            await self.drop(broken)
            raise DeliveryError(f"RabbitMQ: {type(error).__name__}: {error}") from error

    def ready(self) -> aio_pika.abc.AbstractExchange | None:
        """The exchange to publish to, while its channel is open."""
        if self.channel is None or self.channel.is_closed:
            return None
        return self.exchange

    async def open(self) -> aio_pika.abc.AbstractExchange:
        exchange = self.ready()
        if exchange is not None:
            return exchange
        if self.opening is None:
            self.opening = asyncio.Lock()
        async with self.opening:  # concurrent first deliveries open one connection, not many
            exchange = self.ready()
            if exchange is not None:  # opened by the delivery this one waited for
                return exchange
            await self.drop()
            # One bound for the connection, the channel and the exchange's check together.
            self.exchange = await asyncio.wait_for(self._connect(), self.destination.timeout)
            return self.exchange

    async def _connect(self) -> aio_pika.abc.AbstractExchange:
        import aio_pika

        d = self.destination
        # A plain connection, not connect_robust: a lost connection fails the delivery at once
        # (retried by the relay) instead of waiting in the client for a reconnect.
        self.connection = await aio_pika.connect(d.url, timeout=d.timeout)
        self.channel = channel = await self.connection.channel(
            publisher_confirms=True, on_return_raises=True
        )
        if not d.exchange:
            return channel.default_exchange
        # Passive: the exchange is the operator's; a missing one fails here with its name.
        return await channel.get_exchange(d.exchange, ensure=True)

    async def drop(self, broken: object = None) -> None:
        """Close the connection (only if it is still `broken`, when given) and forget it."""
        if broken is not None and broken is not self.connection:
            return  # another delivery already replaced it
        connection, self.connection = self.connection, None
        self.channel = self.exchange = None
        if connection is not None and not connection.is_closed:
            try:
                await asyncio.wait_for(connection.close(), timeout=self.destination.timeout)
            except Exception:  # already broken: nothing left to release
                pass


def _reply(error: Exception) -> str:
    frame = getattr(error, "frame", None)
    code, text = getattr(frame, "reply_code", None), getattr(frame, "reply_text", None)
    return f"{code} {text}" if code else "returned"


class _LoopThread:
    """An event loop in a daemon thread: the sync relay's threads run coroutines on it."""

    def __init__(self, name: str) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.thread.is_alive()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()
