"""The shipping app (tests/apps/shipping.py) with its "shipping" destination on RabbitMQ.

RABBIT_URL and RABBIT_QUEUE name the broker and the queue (on the default exchange). With
RABBIT_HOLD_KEY and RABBIT_HOLD_FILE, the relay that publishes that key (confirmed) creates the
file and then hangs before returning, so the outbox's commit has not happened: a test kills it
there. Only once: a relay started after the file exists does not hang.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from hookinbox import Inbox
from hookinbox._model import Message
from hookinbox.outbox import RabbitMQDestination
from tests.apps import shipping

STRIPE_SECRET = shipping.STRIPE_SECRET


@dataclass
class HeldRabbitMQ(RabbitMQDestination):
    hold_key: str = ""
    hold_file: str = ""

    def deliver(self, message: Message) -> None:
        super().deliver(message)
        if message.key == self.hold_key and self.hold_file and not os.path.exists(self.hold_file):
            with open(self.hold_file, "w") as marker:
                marker.write(str(os.getpid()))
            time.sleep(120)  # published and confirmed, not yet recorded: the test kills us here


def build(database_url: str | None = None) -> Inbox:
    destination = HeldRabbitMQ(
        "shipping",
        url=os.environ.get("RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/"),
        routing_key=os.environ.get("RABBIT_QUEUE", "shipping"),
        timeout=2,
        hold_key=os.environ.get("RABBIT_HOLD_KEY", ""),
        hold_file=os.environ.get("RABBIT_HOLD_FILE", ""),
    )
    return shipping.build(database_url, destination=destination)


inbox = build()
