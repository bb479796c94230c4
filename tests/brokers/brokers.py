"""What the broker tests share: a queue or a stream of their own (deleted after), messages
published to it, an inbox whose handler counts its effects, a consumer run until a
condition holds. Imported by the tests and by `crash_consumer.py`, the child they kill."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from hookinbox import Inbox
from hookinbox.brokers import BrokerSource
from hookinbox.brokers._consumer import Consumer

SOURCE = "orders"


def make_inbox(
    database_url: str,
    *,
    key: str = "payload:id",
    type: str | None = "subject",
    max_body_size: int = 1 << 20,
    migrate: bool = True,
) -> Inbox:
    """An inbox with one broker source whose handler writes one `effects` row per run, in
    its own transaction: a doubled run is two rows. Migrated unless told not to."""
    inbox = Inbox(database_url, max_body_size=max_body_size)
    inbox.add_source(BrokerSource(SOURCE, key=key, type=type))

    @inbox.handler(SOURCE)
    def record(event: Any, ctx: Any) -> None:
        ctx.db.execute(sa.text("INSERT INTO effects (event_key) VALUES (:k)"), {"k": event.id})

    @inbox.after_migrate
    def effects_table(connection: sa.Connection) -> None:
        connection.execute(sa.text("CREATE TABLE IF NOT EXISTS effects (event_key TEXT)"))

    if migrate:
        inbox.migrate()
    return inbox


def effects(inbox: Inbox) -> dict[str, int]:
    with inbox.store.engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT event_key, COUNT(*) FROM effects GROUP BY event_key")
        )
        return {key: count for key, count in rows}


def stored(inbox: Inbox) -> dict[str, int]:
    """Each stored event's key and how many deliveries of it arrived."""
    with inbox.store.engine.connect() as connection:
        rows = connection.execute(
            sa.text("SELECT event_id, delivery_count FROM hookinbox_events WHERE source = :s"),
            {"s": SOURCE},
        )
        return {key: count for key, count in rows}


def order(n: int | str) -> bytes:
    return json.dumps({"id": f"order-{n}", "total": 10}).encode()


@asynccontextmanager
async def running(consumer: Consumer) -> AsyncIterator[asyncio.Task[None]]:
    """`consumer.run()` in a task, stopped (and awaited) on the way out."""
    task = asyncio.create_task(consumer.run())
    try:
        yield task
    finally:
        consumer.stop()
        await asyncio.wait_for(task, 30)


async def until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        await asyncio.sleep(0.05)


# -- RabbitMQ ------------------------------------------------------------------------------


@dataclass
class RabbitQueue:
    """A queue of the test's own, whose dead-letter exchange routes to `dead_letters`."""

    url: str
    name: str
    dead_letters: str
    connection: Any = None
    channel: Any = None

    async def publish(self, body: bytes, **properties: Any) -> None:
        import aio_pika

        await self.channel.default_exchange.publish(
            aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT, **properties),
            routing_key=self.name,
        )

    async def count(self, name: str | None = None) -> int:
        queue = await self.channel.declare_queue(name or self.name, passive=True)
        return int(queue.declaration_result.message_count)

    async def dead_lettered(self) -> list[bytes]:
        queue = await self.channel.get_queue(self.dead_letters)
        bodies = []
        while (message := await queue.get(fail=False, no_ack=True)) is not None:
            bodies.append(message.body)
        return bodies


@asynccontextmanager
async def rabbit_queue(url: str) -> AsyncIterator[RabbitQueue]:
    import aio_pika

    name = f"hookinbox-test-{uuid.uuid4().hex[:12]}"
    queue = RabbitQueue(url, name, f"{name}.dead")
    queue.connection = await aio_pika.connect(url)
    queue.channel = await queue.connection.channel()
    await queue.channel.declare_queue(queue.dead_letters, durable=True)
    arguments = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": queue.dead_letters}
    await queue.channel.declare_queue(name, durable=True, arguments=arguments)
    try:
        yield queue
    finally:
        await queue.channel.queue_delete(name)
        await queue.channel.queue_delete(queue.dead_letters)
        await queue.connection.close()


# -- JetStream -----------------------------------------------------------------------------


@dataclass
class Stream:
    """A stream of the test's own on `{name}.>`, a durable pull consumer of `{name}.orders.>`,
    and dead letters kept on `{name}.dead` by the same stream."""

    url: str
    name: str
    consumer: str
    dead_letter_subject: str
    client: Any = None
    js: Any = None

    async def publish(self, body: bytes, subject: str = "created", **headers: str) -> None:
        await self.js.publish(f"{self.name}.orders.{subject}", body, headers=headers or None)

    async def pending(self) -> int:
        """Messages of the consumer not yet acked (waiting or delivered)."""
        info = await self.js.consumer_info(self.name, self.consumer)
        return int(info.num_pending + info.num_ack_pending)

    async def dead_lettered(self) -> list[Any]:
        found = []
        sub = await self.js.subscribe(self.dead_letter_subject, ordered_consumer=True)
        try:
            while True:
                try:
                    found.append(await sub.next_msg(timeout=0.5))
                except TimeoutError:
                    return found
        finally:
            await sub.unsubscribe()


@asynccontextmanager
async def jetstream(url: str, *, ack_wait: float = 30.0) -> AsyncIterator[Stream]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

    name = f"hookinbox_test_{uuid.uuid4().hex[:12]}"
    stream = Stream(url, name, "inbox", f"{name}.dead")
    stream.client = await nats.connect(url)
    stream.js = stream.client.jetstream()
    await stream.js.add_stream(StreamConfig(name=name, subjects=[f"{name}.>"]))
    await stream.js.add_consumer(
        name,
        ConsumerConfig(
            durable_name=stream.consumer,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            filter_subject=f"{name}.orders.>",
        ),
    )
    try:
        yield stream
    finally:
        await stream.js.delete_stream(name)
        await stream.client.close()


# -- either broker -------------------------------------------------------------------------


@dataclass
class Broker:
    """One broker's queue or stream behind the calls the shared tests make."""

    kind: str
    """`rabbitmq` or `jetstream`."""
    place: RabbitQueue | Stream

    async def publish(self, body: bytes) -> None:
        await self.place.publish(body)

    async def left(self) -> int:
        """Messages not yet acked: waiting, or delivered and unsettled."""
        if isinstance(self.place, RabbitQueue):
            return await self.place.count()
        return await self.place.pending()

    async def dead_lettered(self) -> list[bytes]:
        if isinstance(self.place, RabbitQueue):
            for _ in range(100):  # a rejected message reaches its dead-letter queue soon after
                if await self.place.count(self.place.dead_letters):
                    break
                await asyncio.sleep(0.05)
            return await self.place.dead_lettered()
        return [message.data for message in await self.place.dead_lettered()]

    def consumer(self, inbox: Inbox, **options: Any) -> Consumer:
        from hookinbox.brokers import JetStreamConsumer, RabbitMQConsumer

        if isinstance(self.place, RabbitQueue):
            return RabbitMQConsumer(
                inbox, SOURCE, url=self.place.url, queue=self.place.name, **options
            )
        return JetStreamConsumer(
            inbox,
            SOURCE,
            url=self.place.url,
            stream=self.place.name,
            consumer=self.place.consumer,
            dead_letter_subject=self.place.dead_letter_subject,
            **options,
        )


@asynccontextmanager
async def broker(kind: str, url: str, **options: Any) -> AsyncIterator[Broker]:
    """A queue (`rabbitmq`) or a stream and its consumer (`jetstream`) of the test's own."""
    if kind == "rabbitmq":
        async with rabbit_queue(url) as queue:
            yield Broker(kind, queue)
    else:
        async with jetstream(url, **options) as stream:
            yield Broker(kind, stream)
