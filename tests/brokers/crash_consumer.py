"""A test's child: a broker consumer SIGKILLed between the store's commit and the broker's
ack, run by test_crash.py. Test-only: the kill is a subclass's `settle`, reached only after
the inbox answered that the message is stored; nothing in hookinbox knows of it.

Environment: CRASH_BROKER (rabbitmq or jetstream), CRASH_URL, CRASH_QUEUE or CRASH_STREAM
and CRASH_CONSUMER, CRASH_DATABASE_URL, CRASH_KILL_AT (the Nth ack dies), CRASH_MARK (a file
that gets the body of the message whose ack it was, written before the kill).

With CRASH_PAUSE=1 the Nth ack is not killed but held for a second after the mark is
written, and the consumer runs as `hookinbox consume` does, stopped by SIGTERM: the test
sends it while that message is in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from hookinbox.brokers import JetStreamConsumer, RabbitMQConsumer
from hookinbox.brokers._consumer import Verdict
from hookinbox.cli._consume import run_until_signalled
from tests.brokers.brokers import SOURCE, make_inbox

KILL_AT = int(os.environ["CRASH_KILL_AT"])
PAUSE = os.environ.get("CRASH_PAUSE") == "1"
acks = 0


async def die_before_the_ack(body: bytes) -> None:
    global acks
    acks += 1
    if acks == KILL_AT:
        mark = Path(os.environ["CRASH_MARK"])
        mark.write_bytes(body)
        with mark.open("rb") as written:
            os.fsync(written.fileno())
        if PAUSE:
            await asyncio.sleep(1.0)  # the test's SIGTERM arrives meanwhile
            return
        os.kill(os.getpid(), signal.SIGKILL)


class KilledRabbitMQConsumer(RabbitMQConsumer):
    async def settle(self, message: Any, decided: Verdict) -> None:
        if decided is Verdict.ACK:
            await die_before_the_ack(message.body)
        await super().settle(message, decided)


class KilledJetStreamConsumer(JetStreamConsumer):
    async def settle(self, message: Any, decided: Verdict, reason: str) -> None:
        if decided is Verdict.ACK:
            await die_before_the_ack(message.data)
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
    # Never returns unless paused: the kill comes first (or the test's timeout).
    asyncio.run(run_until_signalled(consumer))


if __name__ == "__main__":
    main()
