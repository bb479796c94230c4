"""`JetStreamConsumer`: a NATS JetStream durable pull consumer feeding a `BrokerSource`
(nats-py, the `nats` extra).

nats-py is the NATS project's own asyncio client. The consumer (made by the user: its
`ack_wait` and `max_deliver` are the redelivery policy) must pull with explicit acks. At most
`prefetch` messages are in flight: each fetch asks for what is free. Each message is settled
after the inbox's ingest answered: `ack` once stored (or a duplicate); for a poison message,
JetStream has no dead-letter queue, so it is published to `dead_letter_subject` (a subject a
stream of the user's keeps; its `Nats-Msg-Id` is the stream and sequence, so a crash between
that publish and the `term` does not copy it twice) and then `term()`ed; `nak(delay=...)`
when the store could not take it.
"""

from __future__ import annotations

import asyncio
import contextlib
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
)

with importing("hookinbox.brokers.JetStreamConsumer", "nats"):
    import nats
    import nats.errors
    import nats.js.errors

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

    from hookinbox import BaseInbox

CONNECT_TIMEOUT = 10.0
FETCH_TIMEOUT = 1.0
"""The longest a fetch waits for messages: `stop()` is seen within about this."""
MESSAGE_ID = "Nats-Msg-Id"
"""The publisher's id of a message, JetStream's de-duplication key: `key="message_id"`."""


class JetStreamConsumer(Consumer):
    """Store the messages of JetStream consumer `consumer` on `stream` as events of the
    inbox's `source`.

    `url` is a NATS URL (`nats://host:4222`). `dead_letter_subject`: where poison messages
    are published before they are terminated (a stream must keep that subject); None
    terminates them with a warning line only.
    """

    def __init__(
        self,
        inbox: BaseInbox,
        source: str,
        *,
        url: str,
        stream: str,
        consumer: str,
        dead_letter_subject: str | None = None,
        prefetch: int = DEFAULT_PREFETCH,
        retry_delay: float = DEFAULT_RETRY_DELAY,
    ) -> None:
        super().__init__(inbox, source, prefetch=prefetch, retry_delay=retry_delay)
        check_url(url, "NATS", ("nats://", "tls://"))
        for what, name in (("stream", stream), ("consumer", consumer)):
            if not isinstance(name, str) or not name or any(c in name for c in " .*>\t\n"):
                raise ConfigurationError(f"{what} must be a JetStream {what} name, not {name!r}")
        if dead_letter_subject is not None and (
            not isinstance(dead_letter_subject, str)
            or not dead_letter_subject
            or any(c in dead_letter_subject for c in " *>\t\n")
        ):
            raise ConfigurationError(
                f"dead_letter_subject must be a NATS subject, not {dead_letter_subject!r}"
            )
        self.url = url
        self.stream = stream
        self.consumer = consumer
        self.dead_letter_subject = dead_letter_subject
        self._client: Client | None = None
        self._js: JetStreamContext | None = None
        self._subscription: JetStreamContext.PullSubscription | None = None

    @property
    def where(self) -> str:
        return f"JetStream consumer {self.stream}/{self.consumer}"

    async def _connect(self) -> None:
        try:
            client = await nats.connect(
                self.url,
                connect_timeout=CONNECT_TIMEOUT,
                max_reconnect_attempts=1,  # the first connection fails after a retry ...
                allow_reconnect=True,
                error_cb=self._on_error,
                disconnected_cb=self._on_disconnected,
                reconnected_cb=self._on_reconnected,
            )
        except (OSError, nats.errors.Error) as error:
            raise BrokerUnavailable(f"cannot connect to NATS: {error}") from error
        # ... and once connected, a restarted server is waited for, however long it takes.
        client.options["max_reconnect_attempts"] = -1
        self._client = client
        try:
            self._js = client.jetstream()
            await self._check(self._js)
            self._subscription = await self._js.pull_subscribe_bind(
                durable=self.consumer, stream=self.stream
            )
        except BaseException:
            await client.close()
            raise

    async def _on_error(self, error: Exception) -> None:
        # nats-py's own default prints a traceback for each failed reconnection attempt.
        log.warning("%s: NATS error: %s", self.where, error or type(error).__name__)

    async def _on_disconnected(self) -> None:
        if self._client is not None:  # not our own close
            log.warning("%s: disconnected from NATS; reconnecting", self.where)

    async def _on_reconnected(self) -> None:
        log.info("%s: reconnected to NATS", self.where)

    async def _check(self, js: JetStreamContext) -> None:
        """The consumer exists, pulls, acks explicitly; the dead-letter subject is kept."""
        try:
            info = await js.consumer_info(self.stream, self.consumer)
        except nats.js.errors.NotFoundError as error:
            raise ConfigurationError(
                f"JetStream has no consumer {self.consumer!r} on stream {self.stream!r}: "
                "create it (a durable pull consumer with explicit acks) before consuming"
            ) from error
        config = info.config
        if config.deliver_subject or str(config.ack_policy) not in (
            "explicit",
            "AckPolicy.EXPLICIT",
        ):
            raise ConfigurationError(
                f"{self.where} must be a pull consumer with explicit acks "
                f"(ack_policy {config.ack_policy}, deliver_subject {config.deliver_subject})"
            )
        if self.dead_letter_subject is not None:
            try:
                await js.find_stream_name_by_subject(self.dead_letter_subject)
            except nats.js.errors.NotFoundError as error:
                raise ConfigurationError(
                    f"no JetStream stream keeps the dead-letter subject "
                    f"{self.dead_letter_subject!r}: add it to a stream's subjects"
                ) from error

    async def _consume(self, stopping: asyncio.Event) -> None:
        assert self._subscription is not None
        while not stopping.is_set():
            free = self.prefetch - self.in_flight
            if free <= 0:
                await self.wait_for_room()
                continue
            try:
                messages = await self._subscription.fetch(batch=free, timeout=FETCH_TIMEOUT)
            except TimeoutError:  # nats.errors.TimeoutError too: nothing came
                continue
            except nats.errors.Error as error:  # a reconnection under way: try again
                log.info("%s: fetch failed (%s)", self.where, error)
                await asyncio.sleep(FETCH_TIMEOUT)
                continue
            for message in messages:
                self.spawn(self._settle_one(message))

    async def _settle_one(self, message: Msg) -> None:
        headers = dict(message.headers or {})
        sequence = message.metadata.sequence.stream
        decided, detail = await self.ingest(
            BrokerMessage(
                body=message.data,
                headers=headers,
                message_id=headers.get(MESSAGE_ID),
                subject=message.subject,
                label=f"#{sequence}",
            )
        )
        try:
            await self.settle(message, decided, detail)
        except (nats.errors.Error, nats.js.errors.Error, OSError) as error:
            log.warning(
                "%s: could not %s #%s (%s): it will be redelivered",
                self.where,
                decided.value,
                sequence,
                error,
            )

    async def settle(self, message: Msg, decided: Verdict, reason: str) -> None:
        """Tell JetStream what became of `message`: reached only after the store answered."""
        if decided is Verdict.ACK:
            await message.ack()
        elif decided is Verdict.DEAD_LETTER:
            await self._dead_letter(message, reason)
        else:
            await message.nak(delay=self.retry_delay)

    async def _dead_letter(self, message: Msg, reason: str) -> None:
        sequence = message.metadata.sequence.stream
        if self.dead_letter_subject is None:
            log.warning(
                "%s: message #%s terminated without a dead-letter subject: %s",
                self.where,
                sequence,
                reason,
            )
            await message.term()
            return
        assert self._js is not None
        headers = dict(message.headers or {})
        original_id = headers.pop(MESSAGE_ID, None)
        headers.update({
            MESSAGE_ID: f"hookinbox-dead-letter:{self.stream}:{sequence}",
            "Hookinbox-Reason": reason[:500],
            "Hookinbox-Stream": self.stream,
            "Hookinbox-Sequence": str(sequence),
            "Hookinbox-Subject": message.subject,
        })  # fmt: skip
        if original_id is not None:
            headers["Hookinbox-Message-Id"] = original_id
        try:
            await self._js.publish(self.dead_letter_subject, message.data, headers=headers)
        except (nats.errors.Error, nats.js.errors.Error) as error:
            # Not kept anywhere yet: the message stays in its stream, tried again later.
            log.error(
                "%s: dead-lettering #%s to %r failed (%s); retried after %.0f s",
                self.where,
                sequence,
                self.dead_letter_subject,
                error,
                self.retry_delay,
            )
            await message.nak(delay=self.retry_delay)
            return
        await message.term()

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        with contextlib.suppress(nats.errors.Error, OSError):
            await client.flush(timeout=5)  # the last acks reach the server before we leave
        await client.close()
