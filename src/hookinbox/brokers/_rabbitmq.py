"""`RabbitMQConsumer`: a RabbitMQ queue feeding a `BrokerSource` (aio-pika, the `rabbitmq`
extra).

aio-pika is asyncio's maintained AMQP 0-9-1 client, and its robust connection reconnects and
consumes again by itself after the broker restarts. Messages come with manual acks and a
prefetch count (`prefetch`): at most that many are unacked at once. Each is settled after the
inbox's ingest answered: `ack` once stored (or a duplicate), `reject(requeue=False)` for a
poison message (the queue's `x-dead-letter-exchange` takes it; without one RabbitMQ drops
it), `nack(requeue=True)` after `retry_delay` when the store could not take it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from hookinbox._errors import BrokerUnavailable, ConfigurationError
from hookinbox._extras import importing
from hookinbox.brokers._consumer import (
    DEFAULT_PREFETCH,
    DEFAULT_RETRY_DELAY,
    BrokerMessage,
    Consumer,
    Verdict,
    check_url,
    log,
    text_headers,
)

with importing("hookinbox.brokers.RabbitMQConsumer", "rabbitmq"):
    import aio_pika
    import aiormq.exceptions

if TYPE_CHECKING:
    from aio_pika.abc import (
        AbstractIncomingMessage,
        AbstractQueue,
        AbstractRobustConnection,
    )

    from hookinbox import BaseInbox

CONNECT_TIMEOUT = 10.0


class RabbitMQConsumer(Consumer):
    """Store the messages of RabbitMQ's `queue` as events of the inbox's `source`.

    The queue must exist (declare it with its dead-letter exchange: docs/brokers.md). `url`
    is an AMQP URL (`amqp://user:password@host:5672/vhost`).
    """

    def __init__(
        self,
        inbox: BaseInbox,
        source: str,
        *,
        url: str,
        queue: str,
        prefetch: int = DEFAULT_PREFETCH,
        retry_delay: float = DEFAULT_RETRY_DELAY,
    ) -> None:
        super().__init__(inbox, source, prefetch=prefetch, retry_delay=retry_delay)
        check_url(url, "RabbitMQ", ("amqp://", "amqps://"))
        if not isinstance(queue, str) or not queue or len(queue.encode()) > 255:
            raise ConfigurationError(f"queue must be a RabbitMQ queue name, not {queue!r}")
        self.url = url
        self.queue_name = queue
        self._connection: AbstractRobustConnection | None = None
        self._queue: AbstractQueue | None = None

    @property
    def where(self) -> str:
        return f"RabbitMQ queue {self.queue_name!r}"

    async def _connect(self) -> None:
        try:
            connection = await aio_pika.connect_robust(self.url, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, aiormq.exceptions.AMQPError) as error:
            raise BrokerUnavailable(f"cannot connect to RabbitMQ: {error}") from error
        self._connection = connection
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=self.prefetch)
        try:
            self._queue = await channel.get_queue(self.queue_name, ensure=True)
        except aiormq.exceptions.ChannelNotFoundEntity as error:
            await connection.close()
            raise ConfigurationError(
                f"RabbitMQ has no queue {self.queue_name!r}: declare it (with its dead-letter "
                "exchange) before consuming"
            ) from error

    async def _consume(self, stopping: asyncio.Event) -> None:
        assert self._queue is not None
        tag = await self._queue.consume(self._on_message, no_ack=False)
        await stopping.wait()
        # No new message past this point; those already delivered are settled by `_drain`,
        # the rest go back to the queue when the channel closes.
        try:
            await self._queue.cancel(tag)
        except (aiormq.exceptions.AMQPError, RuntimeError, ConnectionError) as error:
            log.info("%s: cancel failed (%s); closing", self.where, error)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        self.spawn(self._settle_one(message))

    async def _settle_one(self, message: AbstractIncomingMessage) -> None:
        decided, _ = await self.ingest(
            BrokerMessage(
                body=message.body,
                headers=text_headers(message.headers),
                message_id=message.message_id,
                subject=message.routing_key,
                label=f"#{message.delivery_tag}",
            )
        )
        try:
            await self.settle(message, decided)
        except (aiormq.exceptions.AMQPError, RuntimeError, ConnectionError) as error:
            # The channel went away with the message unacked: RabbitMQ delivers it again,
            # and the inbox answers that copy as a duplicate.
            log.warning(
                "%s: could not %s #%s (%s): it will be redelivered",
                self.where,
                decided.value,
                message.delivery_tag,
                error,
            )

    async def settle(self, message: AbstractIncomingMessage, decided: Verdict) -> None:
        """Tell RabbitMQ what became of `message`: reached only after the store answered."""
        if decided is Verdict.ACK:
            await message.ack()
        elif decided is Verdict.DEAD_LETTER:
            await message.reject(requeue=False)
        else:
            await self.pause()
            await message.nack(requeue=True)

    async def _close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None
