"""A test's child: a broker consumer SIGKILLed between the store's commit and the broker's
ack, run by test_crash.py. Test-only: the kill is a subclass's `settle`, reached only after
the inbox answered that the message is stored; nothing in hookinbox knows of it.

Environment: CRASH_BROKER (rabbitmq or jetstream), CRASH_URL, CRASH_QUEUE or CRASH_STREAM
and CRASH_CONSUMER, CRASH_DATABASE_URL, CRASH_KILL_AT (the Nth ack dies), CRASH_MARK (a file
that gets the body of the message whose ack it was, written before the kill).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from hookinbox.brokers import JetStreamConsumer, RabbitMQConsumer
from hookinbox.brokers._consumer import Verdict
from tests.brokers.brokers import SOURCE, make_inbox

KILL_AT = int(os.environ["CRASH_KILL_AT"])
acks = 0


def die_before_the_ack(body: bytes) -> None:
    global acks
    acks += 1
    if acks == KILL_AT:
        mark = Path(os.environ["CRASH_MARK"])
        mark.write_bytes(body)
        with mark.open("rb") as written:
            os.fsync(written.fileno())
        os.kill(os.getpid(), signal.SIGKILL)


class KilledRabbitMQConsumer(RabbitMQConsumer):
    async def settle(self, message: Any, decided: Verdict) -> None:
        if decided is Verdict.ACK:
            die_before_the_ack(message.body)
        await super().settle(message, decided)


class KilledJetStreamConsumer(JetStreamConsumer):
    async def settle(self, message: Any, decided: Verdict, reason: str) -> None:
        if decided is Verdict.ACK:
            die_before_the_ack(message.data)
        await super().settle(message, decided, reason)


def main() -> None:
    inbox = make_inbox(os.environ["CRASH_DATABASE_URL"])
    url = os.environ["CRASH_URL"]
    consumer: RabbitMQConsumer | JetStreamConsumer
    if os.environ["CRASH_BROKER"] == "rabbitmq":
        consumer = KilledRabbitMQConsumer(
            inbox, SOURCE, url=url, queue=os.environ["CRASH_QUEUE"], prefetch=4
        )
    else:
        consumer = KilledJetStreamConsumer(
            inbox,
            SOURCE,
            url=url,
            stream=os.environ["CRASH_STREAM"],
            consumer=os.environ["CRASH_CONSUMER"],
            prefetch=4,
        )
    asyncio.run(consumer.run())  # never returns: the kill comes first (or the test's timeout)


if __name__ == "__main__":
    main()
